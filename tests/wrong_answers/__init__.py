"""Plausible wrong answers to each lab's exercises (one module per lab: ``labNN.py``)."""
