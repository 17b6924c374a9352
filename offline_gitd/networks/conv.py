"""A 2-D convolution computed as one matrix product, so that seeds in one program batch on the CPU.

Each seed of a run has its own weights, and the run vmaps its step over seeds. ``jax.vmap`` turns
``lax.conv_general_dilated`` with per-seed kernels into a grouped convolution, which XLA's CPU
backend runs 15-30x slower than one seed's convolution. Here the convolution is written as a
weight-free rearrangement of the input into patches followed by one product with the kernel:
vmapped, the rearrangement is just a larger batch and the product a batched matrix product, whose
cost grows with the number of seeds as the arithmetic does.

The patches come from a space-to-depth rearrangement rather than from k*k strided slices: a
k x k kernel with stride s reads (k/s) x (k/s) blocks of s x s pixels, so the patch matrix is the
concatenation of (k/s)^2 shifted views of the blocked input, each a contiguous run of s*s*C
values (Nature CNN's 8x8/4 first layer: 4 views of 64 values, not 64 views of 4).

:class:`Conv` holds exactly the parameters of ``flax.linen.Conv`` (``kernel`` [kh, kw, cin, cout],
``bias`` [cout], same initialisers, same auto-generated name ``Conv_i``), so parameter trees and
checkpoints are the same whichever computes the convolution. The choice is made once per
backend, when the step is traced: patches on the CPU, where they were measured
(docs/benchmarks.md#seeds-in-one-program); XLA's own convolution elsewhere, where the GPU's
convolution kernels take per-seed weights as feature groups and patches were not measured.

Only the MinAtar torso uses it: its seeds stay vmapped on the CPU, where patches beat running
each seed's own step. The Nature and IMPALA torsos run each seed's own step on the CPU instead
(:func:`~offline_gitd.learners.drivers.choose_seed_strategy`), where XLA's own convolution is the
faster one for a single seed.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from offline_gitd.networks.dense import dense_product

PADDINGS = ("VALID", "SAME")


def _same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """(low, high) padding of ``lax``'s "SAME": out = ceil(size / stride), the excess split low-first."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def conv_patches(x: jnp.ndarray, kernel_size: tuple[int, int], strides: tuple[int, int], padding: str) -> jnp.ndarray:
    """Patches [N, oh, ow, P] of NHWC input ``x`` for :func:`patch_kernel`'s layout of a kernel.

    The kernel is padded (by :func:`patch_kernel`) to a multiple of the stride, m = ceil(k / s)
    blocks; the patch of output (i, j) is blocks (i..i+m-1, j..j+m-1) of the space-to-depth input,
    ordered (block row, block column, row in block, column in block, channel).
    """
    if padding not in PADDINGS:
        raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")
    n, h, w, c = x.shape
    (kh, kw), (sh, sw) = kernel_size, strides
    if padding == "SAME":
        x = jnp.pad(x, ((0, 0), _same_padding(h, kh, sh), _same_padding(w, kw, sw), (0, 0)))
        h, w = x.shape[1:3]
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    mh, mw = -(-kh // sh), -(-kw // sw)
    # rows and columns the blocks cover: the kernel's zero padding may reach past the input's edge
    bh, bw = oh + mh - 1, ow + mw - 1
    x = x[:, : bh * sh, : bw * sw]
    x = jnp.pad(x, ((0, 0), (0, bh * sh - x.shape[1]), (0, bw * sw - x.shape[2]), (0, 0)))
    if sh > 1 or sw > 1:
        x = x.reshape(n, bh, sh, bw, sw, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, bh, bw, sh * sw * c)
    views = [x[:, i : i + oh, j : j + ow] for i in range(mh) for j in range(mw)]
    return views[0] if len(views) == 1 else jnp.concatenate(views, axis=-1)


def patch_kernel(kernel: jnp.ndarray, strides: tuple[int, int]) -> jnp.ndarray:
    """HWIO kernel [kh, kw, cin, cout] -> [P, cout] in :func:`conv_patches`'s patch order."""
    kh, kw, cin, cout = kernel.shape
    sh, sw = strides
    mh, mw = -(-kh // sh), -(-kw // sw)
    kernel = jnp.pad(kernel, ((0, mh * sh - kh), (0, mw * sw - kw), (0, 0), (0, 0)))
    kernel = kernel.reshape(mh, sh, mw, sw, cin, cout).transpose(0, 2, 1, 3, 4, 5)
    return kernel.reshape(mh * mw * sh * sw * cin, cout)


class Conv(nn.Module):
    """``flax.linen.Conv`` (NHWC, no dilation, one group) computed as patches times a matrix.

    Same parameters, initialisers and outputs (to float tolerance) as ``nn.Conv`` with these
    arguments; on the CPU, fast under ``jax.vmap`` over per-seed parameters.
    """

    features: int
    kernel_size: Sequence[int]
    strides: Sequence[int] = (1, 1)
    padding: str = "SAME"
    use_bias: bool = True
    kernel_init: nn.initializers.Initializer = nn.linear.default_kernel_init
    bias_init: nn.initializers.Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        kernel_size, strides = tuple(self.kernel_size), tuple(self.strides)
        kernel = self.param("kernel", self.kernel_init, (*kernel_size, x.shape[-1], self.features), jnp.float32)
        x = x.astype(jnp.float32)
        if jax.default_backend() == "cpu":
            patches = conv_patches(x, kernel_size, strides, self.padding)
            # the product with dense's gradient rule: the kernel's gradient in its own layout
            y = dense_product(patches, patch_kernel(kernel, strides))
        else:
            y = jax.lax.conv_general_dilated(
                x, kernel, strides, self.padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
            )
        if self.use_bias:
            y = y + self.param("bias", self.bias_init, (self.features,), jnp.float32)
        return y
