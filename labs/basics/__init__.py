"""Part I (Chapters 1-2): the arithmetic every later chapter leans on.

* :mod:`labs.basics.memory` -- bytes to serve and to train a model, KV cache, GPUs needed;
* :mod:`labs.basics.flops` -- counting and timing matrix products;
* :mod:`labs.basics.widgets` -- interactive widgets that keep working in the static book.
"""
