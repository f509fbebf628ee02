"""Hardware-level accounting: what a GPU's memory hierarchy allows (Chapter 8)."""
