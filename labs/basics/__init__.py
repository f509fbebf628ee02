"""Part I (Chapters 1-2): the arithmetic every later chapter leans on.

* :mod:`labs.basics.memory` -- bytes to serve and to train a model, KV cache, GPUs needed;
* :mod:`labs.basics.flops` -- counting and timing matrix products (the project's one timer,
  :func:`~labs.basics.flops.time_fn`: the wall clock on a CPU, CUDA events on a GPU);
* :mod:`labs.basics.device` -- the one device convention every measuring cell follows
  (``labs.device()``) and the capability queries behind GPU-only cells' skip lines;
* :mod:`labs.basics.widgets` -- interactive widgets that keep working in the static book.
"""
