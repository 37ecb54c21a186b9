"""The banded objective in O(n²·b): ‖A Ĉ⁻¹‖_F² from the b diagonals of C, by block forward substitution.

A b-banded lower-triangular C, cut into b×b blocks, is block lower-bidiagonal: block row I holds a lower
triangular L_I on the diagonal and a strictly upper triangular U_I left of it. So W = C⁻¹ follows block by
block, W_I = L_I⁻¹ (E_I − U_I W_{I−1}) (E_I: rows I·b… of the identity), ⌈n/b⌉ sequential steps of
b×b by b×m matrix work: O(n²·b) time, O(n²) memory (also under reverse-mode differentiation, whose
residuals are the W_I), against the dense triangular solve's O(n³). The parameters are the diagonals,
D[k, j] = C[j + k, j]; n is padded to m = b·⌈n/b⌉ with the identity, which leaves the leading n×n block
of C⁻¹ unchanged (C is lower triangular).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def layout(n: int, bands: int):
    """Index arrays (numpy) for the diagonal parameters D (b, m): which entries are real, and where each
    entry of the block rows [U_I | L_I] (shape (m/b, b, 2b)) lives in D (lag, column) or is zero."""
    m = -(-n // bands) * bands
    k, j = np.indices((bands, m))
    valid = (j + k < n)
    blocks = m // bands
    I, r, s = np.indices((blocks, bands, 2 * bands))
    column = (I - 1) * bands + s
    lag = bands + r - s  # row I·b + r minus column (I − 1)·b + s
    inside = (lag >= 0) & (lag < bands) & (column >= 0)
    return m, valid, np.where(inside, lag, 0), np.where(inside, column, 0), inside


def normalised(D, valid, n: int):
    """The diagonals masked to the n×n band, each column of C divided by its norm; padding columns are
    the identity."""
    D = jnp.where(valid, D, 0.0)
    norms = jnp.sqrt(jnp.sum(D * D, axis=0))
    padding = jnp.arange(D.shape[1]) >= n
    D = D / jnp.where(padding, 1.0, norms)
    return D.at[0].set(jnp.where(padding, 1.0, D[0]))


def dense(D, n: int) -> np.ndarray:
    """The n×n matrix C of diagonals D (numpy)."""
    D = np.asarray(D)
    C = np.zeros((n, n))
    for k in range(D.shape[0]):
        C += np.diag(D[k, : n - k], -k) if k < n else 0.0
    return C


def inverse_error(D, lags, columns, inside, n: int):
    """‖A C⁻¹‖_F² for prefix-sum A, C given by its (normalised, padded) diagonals D: rows of A C⁻¹ are
    the running sums of the rows of C⁻¹, accumulated block by block."""
    bands, m = D.shape
    blocks = jnp.where(inside, D[lags, columns], 0.0)  # (m/b, b, 2b): [U_I | L_I]
    U, L = blocks[:, :, :bands], blocks[:, :, bands:]
    eye = jnp.eye(bands, m, dtype=D.dtype)

    def step(carry, inputs):
        previous, running, total = carry
        I, U_I, L_I = inputs
        right = jnp.roll(eye, I * bands, axis=1) - U_I @ previous
        W_I = jax.scipy.linalg.solve_triangular(L_I, right, lower=True)
        rows = running + jnp.cumsum(W_I, axis=0)
        keep = (I * bands + jnp.arange(bands))[:, None] < n  # only the n real rows and columns count
        rows_n = jnp.where(keep & (jnp.arange(m) < n)[None, :], rows, 0.0)
        return (W_I, rows[-1], total + jnp.sum(rows_n * rows_n)), None

    init = (jnp.zeros((bands, m), D.dtype), jnp.zeros(m, D.dtype), jnp.zeros((), D.dtype))
    (_, _, total), _ = jax.lax.scan(step, init, (jnp.arange(m // bands), U, L))
    return total


def lbfgs(loss, x0, tolerance, iterations: int, mask=None):
    """Minimise ``loss`` from ``x0`` by L-BFGS (optax, zoom line search) until the gradient's norm relative to
    the loss falls to ``tolerance`` or after ``iterations`` steps; entries outside ``mask`` (when given) are
    held fixed (their gradient zeroed). Returns (x, steps used). Traced by the caller's jit."""
    import optax

    solver = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(loss)

    def step(carry):
        x, state, _, i = carry
        value, grad = value_and_grad(x, state=state)
        if mask is not None:
            grad = jnp.where(mask, grad, 0.0)
        updates, state = solver.update(grad, state, x, value=value, grad=grad, value_fn=loss)
        x = optax.apply_updates(x, updates)
        return x, state, jnp.linalg.norm(grad) / jnp.maximum(value, 1e-300), i + 1

    def going(carry):
        _, _, size, i = carry
        return (i < iterations) & (size > tolerance)

    init = (x0, solver.init(x0), jnp.asarray(jnp.inf, x0.dtype), jnp.asarray(0))
    x, _, _, used = jax.lax.while_loop(going, step, init)
    return x, used


def optimise(D0, valid, lags, columns, inside, n: int, tolerance, iterations: int):
    """L-BFGS on ‖A Ĉ⁻¹‖_F² over the diagonals; returns (D̂, loss, iterations). Jitted by the caller (n,
    iterations and the index arrays are static shapes)."""

    def loss(D):
        return inverse_error(normalised(D, valid, n), lags, columns, inside, n)

    D, used = lbfgs(loss, D0, tolerance, iterations, mask=valid)
    return normalised(D, valid, n), loss(D), used


def toeplitz_error(c, n: int):
    """‖A C⁻¹‖_F² for the lower-triangular Toeplitz C with first column (c_0, …, c_{b−1}, 0, …): C⁻¹ is
    Toeplitz with the first n coefficients w of 1/c(x) (w_t = (δ_t − Σ_k c_k w_{t−k})/c_0), A C⁻¹ is
    Toeplitz with their running sums s_t, and s_t appears on n − t diagonal entries. O(n·b)."""
    bands = c.shape[0]

    def step(past, t):  # past: w_{t−1}, …, w_{t−b+1}
        w = (jnp.where(t == 0, 1.0, 0.0) - jnp.dot(c[1:], past)) / c[0]
        return jnp.concatenate([w[None], past[:-1]]) if bands > 1 else past, w

    _, w = jax.lax.scan(step, jnp.zeros(bands - 1, c.dtype), jnp.arange(n))
    s = jnp.cumsum(w)
    return jnp.sum((n - jnp.arange(n)) * s * s)


def optimise_toeplitz(c0, n: int, tolerance, iterations: int):
    """L-BFGS on ‖A Ĉ⁻¹‖_F², ĉ = c/‖c‖ (the largest column norm of the Toeplitz C is ‖c‖)."""

    def loss(c):
        return toeplitz_error(c / jnp.linalg.norm(c), n)

    c, used = lbfgs(loss, c0, tolerance, iterations)
    return c / jnp.linalg.norm(c), loss(c), used
