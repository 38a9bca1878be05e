"""Batched kernels: the fused evaluation of a relation's notions (XLA, or the native C++ kernel
where it applies) and the samplers of random mechanisms. Imports only :mod:`jaxpriv.core`."""
