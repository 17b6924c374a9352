"""A fully connected layer whose kernel gradient is computed in the kernel's own layout.

Reverse-mode JAX differentiates ``y = x @ W`` with respect to ``W`` as ``(g^T x)^T``: a product that
comes out as [out, in] followed by a transpose to W's [in, out]. XLA's GPU backend folds such a
transpose into the product's output layout; its CPU backend (the pinned jaxlib) does not. It
pushes the transpose into the consumers of the gradient instead, Adam's two moment updates, and a
loop fusion that reads its operand transposed is slow. On MinAtar's 1,024 x 128 layer those two
fusions took about half of a whole DQN update on one core (docs/benchmarks.md#the-update-itself).

Here the product carries its own vector-Jacobian product, ``dW = x^T g`` written as one product
whose output is already [in, out], and ``dx = g W^T``: the same derivatives, computed without the
transpose. :class:`Dense` holds exactly the parameters of ``flax.linen.Dense`` (``kernel``
[in, out], ``bias`` [out], the same initialisers and auto-generated name ``Dense_i``), so
parameter trees and checkpoints are the same whichever layer made them.

The rule is first-order only: ``jax.jvp`` through it is refused (no loss of the package takes
forward-mode or second derivatives of a network).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

# contract the rows of two matrices: x [n, a], g [n, b] -> [a, b]
_ROWS = (((0,), (0,)), ((), ()))
# contract the columns of two matrices: g [n, b], w [a, b] -> [n, a]
_COLUMNS = (((1,), (1,)), ((), ()))


@jax.custom_vjp
def matmul(x: jnp.ndarray, kernel: jnp.ndarray) -> jnp.ndarray:
    """``x @ kernel`` for x [n, in] and kernel [in, out], differentiated in the kernel's layout."""
    return x @ kernel


def _matmul_forward(x: jnp.ndarray, kernel: jnp.ndarray) -> tuple[jnp.ndarray, tuple[jnp.ndarray, jnp.ndarray]]:
    return x @ kernel, (x, kernel)


def _matmul_backward(residuals: tuple[jnp.ndarray, jnp.ndarray], g: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    x, kernel = residuals
    dx = jax.lax.dot_general(g, kernel, _COLUMNS)
    dkernel = jax.lax.dot_general(x, g, _ROWS)
    return dx.astype(x.dtype), dkernel.astype(kernel.dtype)


matmul.defvjp(_matmul_forward, _matmul_backward)


def dense_product(x: jnp.ndarray, kernel: jnp.ndarray) -> jnp.ndarray:
    """``x @ kernel`` over any leading axes of ``x`` (flattened into one for :func:`matmul`)."""
    rows = x.reshape(-1, x.shape[-1])
    return matmul(rows, kernel).reshape(*x.shape[:-1], kernel.shape[-1])


class Dense(nn.Module):
    """``flax.linen.Dense`` (float32 parameters) with :func:`matmul`'s gradient: same parameters,
    initialisers and outputs, derivatives equal to float tolerance, cheaper on the CPU."""

    features: int
    use_bias: bool = True
    kernel_init: nn.initializers.Initializer = nn.linear.default_kernel_init
    bias_init: nn.initializers.Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        kernel = self.param("kernel", self.kernel_init, (x.shape[-1], self.features), jnp.float32)
        y = dense_product(x.astype(jnp.float32), kernel)
        if self.use_bias:
            y = y + self.param("bias", self.bias_init, (self.features,), jnp.float32)
        return y
