"""Chapter 11, FlashAttention: exact attention, naive and tiled, in PyTorch and in Triton.

* :mod:`labs.attention.flash` -- naive attention, the online softmax, FlashAttention-2's tiled
  forward and backward in PyTorch;
* :mod:`labs.attention.triton_fwd` -- the Triton kernels (forward, and the autograd function);
* :mod:`labs.attention.triton_bwd` -- the Triton backward kernels.

Import :mod:`labs.attention.triton_fwd` before Triton itself: on a machine without a GPU it
switches Triton to its interpreter (``TRITON_INTERPRET=1``).
"""
