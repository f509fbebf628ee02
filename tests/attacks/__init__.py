"""Attacks on the grader, kept as code so that every test can replay them."""
