"""A fully connected layer whose kernel gradient is computed in the kernel's own layout.

Reverse-mode JAX differentiates ``y = x @ W`` with respect to ``W`` as ``(g^T x)^T``: a product that
comes out as [out, in] followed by a transpose to W's [in, out]. XLA's GPU backend folds such a
transpose into the product's output layout; its CPU backend (the pinned jaxlib) does not. It
pushes the transpose into the consumers of the gradient instead, Adam's two moment updates, and a
loop fusion that reads its operand transposed is slow. On MinAtar's 1,024 x 128 layer those two
fusions took about half of a whole DQN update on one core (docs/benchmarks.md#the-update-itself).

Here the product's derivative is written so that its transpose, the gradient, is ``dW = x^T g``
as one product whose output is already [in, out], and ``dx = g W^T``: the same derivatives,
computed without the transpose. :class:`Dense` holds exactly the parameters of
``flax.linen.Dense`` (``kernel`` [in, out], ``bias`` [out], the same initialisers and
auto-generated name ``Dense_i``), so parameter trees and checkpoints are the same whichever layer
made them.

The rule is a forward-mode one (``jax.custom_jvp``), so every JAX transformation goes through it:
``jax.grad``, ``jax.jvp``, ``jax.jacfwd``, ``jax.jacrev``, ``jax.hessian`` and ``jax.vmap`` of
each (docs/critics.md#networks). Its tangent ``dx W + x dW`` is written with the small bilinear
primitive :data:`kernel_product_p` for the ``x dW`` term; JAX transposes a plain ``x @ dW`` as
``(g^T x)^T``, and the primitive's own transpose rule is what writes ``x^T g`` instead. A
``jax.custom_vjp`` rule would give the same gradient but refuses ``jax.jvp`` outright.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

# contract the rows of two matrices: x [n, a], g [n, b] -> [a, b]
_ROWS = (((0,), (0,)), ((), ()))
# contract the columns of two matrices: g [n, b], w [a, b] -> [n, a]
_COLUMNS = (((1,), (1,)), ((), ()))


def _leading(x: jnp.ndarray) -> tuple[int, ...]:
    """The batch axes of a :data:`kernel_product_p` operand: all but its last two."""
    return tuple(range(x.ndim - 2))


def _product(x: jnp.ndarray, kernel: jnp.ndarray) -> jnp.ndarray:
    """x [*b, n, in] @ kernel [*b, in, out] -> [*b, n, out], the leading axes b batched."""
    batch = _leading(x)
    return jax.lax.dot_general(x, kernel, (((x.ndim - 1,), (kernel.ndim - 2,)), (batch, batch)))


kernel_product_p = Primitive("dense_kernel_product")
"""``x @ kernel`` with batch axes in front, bilinear; its transpose for ``kernel`` is ``x^T g``
computed in the kernel's layout. Used only for the kernel's term of :func:`matmul`'s tangent."""
kernel_product_p.def_impl(_product)
kernel_product_p.def_abstract_eval(
    lambda x, kernel: jax.core.ShapedArray((*x.shape[:-1], kernel.shape[-1]), jnp.result_type(x, kernel))
)
mlir.register_lowering(kernel_product_p, mlir.lower_fun(_product, multiple_results=False))


def _transpose_for_x(g: jnp.ndarray, x: object, kernel: jnp.ndarray) -> jnp.ndarray:
    """dx = g kernel^T: g [*b, n, out], kernel [*b, in, out] -> [*b, n, in], x's layout."""
    batch = _leading(g)
    return jax.lax.dot_general(g, kernel, (((g.ndim - 1,), (kernel.ndim - 1,)), (batch, batch)))


def _transpose_for_kernel(g: jnp.ndarray, x: jnp.ndarray, kernel: object) -> jnp.ndarray:
    """dkernel = x^T g: x [*b, n, in], g [*b, n, out] -> [*b, in, out], the kernel's layout."""
    batch = _leading(g)
    return jax.lax.dot_general(x, g, (((x.ndim - 2,), (g.ndim - 2,)), (batch, batch)))


ad.defbilinear(kernel_product_p, _transpose_for_x, _transpose_for_kernel)


def _kernel_product_batch(
    args: tuple[jnp.ndarray, jnp.ndarray], dims: tuple[int | None, int | None]
) -> tuple[jnp.ndarray, int]:
    """vmap: a kernel with its own vmapped axis makes that axis a batch axis of the product (an
    unmapped x broadcast along it); a mapped x with a shared kernel folds its axis into the rows."""
    (x, kernel), (x_dim, kernel_dim) = args, dims
    if kernel_dim is None:
        # x [..S.., *b, n, in]: S next to the rows, merged into them, one product with the kernel
        rows = x.ndim - 3
        x = jnp.moveaxis(x, x_dim, rows)
        merged = x.reshape(*x.shape[:rows], x.shape[rows] * x.shape[rows + 1], x.shape[-1])
        out = kernel_product_p.bind(merged, kernel)
        return out.reshape(*x.shape[:-1], kernel.shape[-1]), rows
    kernel = jnp.moveaxis(kernel, kernel_dim, 0)
    if x_dim is None:
        x = jnp.broadcast_to(x, (kernel.shape[0], *x.shape))
    else:
        x = jnp.moveaxis(x, x_dim, 0)
    return kernel_product_p.bind(x, kernel), 0


batching.primitive_batchers[kernel_product_p] = _kernel_product_batch


@jax.custom_jvp
def matmul(x: jnp.ndarray, kernel: jnp.ndarray) -> jnp.ndarray:
    """``x @ kernel`` for x [n, in] and kernel [in, out], differentiated in the kernel's layout."""
    return x @ kernel


def _matmul_jvp(
    primals: tuple[jnp.ndarray, jnp.ndarray], tangents: tuple[jnp.ndarray, jnp.ndarray]
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """d(x W) = dx W + x dW; a zero tangent (an input or kernel not differentiated) adds no term."""
    (x, kernel), (dx, dkernel) = primals, tangents
    terms = []
    if not isinstance(dx, SymbolicZero):
        terms.append(dx @ kernel)
    if not isinstance(dkernel, SymbolicZero):
        terms.append(kernel_product_p.bind(x, dkernel))
    y = x @ kernel
    if not terms:
        return y, jnp.zeros_like(y)
    return y, terms[0] if len(terms) == 1 else terms[0] + terms[1]


matmul.defjvp(_matmul_jvp, symbolic_zeros=True)


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
