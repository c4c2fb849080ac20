"""Every loss of ``losses.LOSSES`` as another JAX program meets it.

Per-class vectors closed over by a jitted function (as a jax array, as a
NumPy array) or passed as its argument, inside ``lax.scan`` and
``shard_map``; ``jax_enable_x64`` with float32, bfloat16 and float16
logits (values and gradients as without it, and no float64 work per
example); hyperparameters of the wrong shape, ``[B]`` logits and sigmoid
targets outside ``[0, 1]``, each with an error that names the argument at
fault; the API's lists. Each loss's arguments come from its signature
(``REQUIRED`` of tests/losses/plain_forms_test.py for those without a
default), so a loss added to ``LOSSES`` is covered here without a line of
its own.
"""

from __future__ import annotations

import inspect
import types
from typing import Any, Callable

from absl.testing import absltest
from absl.testing import parameterized
import jax
from jax.extend import core as jax_core
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np

import losses
from tests.losses import plain_forms_test

Z = plain_forms_test.Z.astype(np.float32)  # [B, C] = [5, 4]
B, C = Z.shape
Y = np.array([2, 0, 3, 1, 1], np.int32)
MULTI_HOT = plain_forms_test.MULTI_HOT.astype(np.float32)
# Per-class vectors a loss takes without requiring them (focal's class
# weights; JO's prior comes from REQUIRED, as its name is there).
OPTIONAL_VECTORS = {"focal_loss": {"alpha": np.linspace(0.2, 1.0, C)}}


def every_loss() -> list[Callable[..., jax.Array]]:
  """Every loss of ``losses.LOSSES`` and, after it, its ``_grad`` twin."""
  out = []
  for family in losses.LOSSES.values():
    for loss in family:
      out.append(loss)
      twin = getattr(losses, loss.__name__ + "_grad", None)
      if twin is not None:
        out.append(twin)
  return out


def _loss_name(fn) -> str:
  return fn.__name__.removesuffix("_grad")


def arguments(fn) -> tuple[np.ndarray | None, dict[str, Any]]:
  """``(labels or None, keyword arguments)`` of a call of ``fn`` on ``Z``.

  Fresh NumPy copies each call: JAX caches the device copy of a NumPy
  array closed over by a trace by the array's identity, whatever the x64
  mode that made it.
  """
  parameters = inspect.signature(fn).parameters
  kwargs = {}
  for name, p in parameters.items():
    if p.kind is not p.KEYWORD_ONLY:
      continue
    if p.default is p.empty or (p.default is None
                                and name in plain_forms_test.REQUIRED):
      kwargs[name] = np.array(plain_forms_test.REQUIRED[name])
  kwargs.update({k: np.array(v) for k, v in
                 OPTIONAL_VECTORS.get(_loss_name(fn), {}).items()})
  if "labels" not in parameters:
    return None, kwargs
  # The softmax family takes a class axis; the sigmoid family does not.
  return (Y.copy() if "axis" in parameters else MULTI_HOT.copy()), kwargs


def of_logits(fn, labels, kwargs) -> Callable[[jax.Array], jax.Array]:
  return lambda z: fn(z, *(() if labels is None else (labels,)), **kwargs)


def _named(fns):
  return [(fn.__name__, fn) for fn in fns]


def _family(name: str) -> set[str]:
  return {fn.__name__ for fn in losses.LOSSES[name]}


# --------------------------------------------------------------------------
# Per-class vectors under jit, scan and shard_map.
# --------------------------------------------------------------------------
def _vector_cases():
  """(name, fn, keyword) for every array hyperparameter of every loss."""
  return [(f"{fn.__name__}_{key}", fn, key) for fn in every_loss()
          for key, value in arguments(fn)[1].items() if np.ndim(value)]


# One device: the trace of a shard_map body is what closes over the vector.
_MESH = jax.make_mesh((1,), ("batch",))


class ClosedOverVectorTest(parameterized.TestCase):
  """A vector given as a jax array closed over by a jitted function is a
  concrete array, but a jnp operation on it inside the trace is not: the
  library's checks must read it without one."""

  @parameterized.named_parameters(*_vector_cases())
  def test_closed_over_as_argument_in_scan_and_shard_map(self, fn, key):
    labels, kwargs = arguments(fn)
    want = of_logits(fn, labels, kwargs)(Z)
    closed = of_logits(fn, labels, dict(kwargs,
                                        **{key: jnp.asarray(kwargs[key])}))

    # One program, each way of handing the vector over in it: every
    # closed-over value is a constant of this trace, as in a user's step.
    @jax.jit
    def ways(z, vector):
      return dict(
          jax_array=closed(z),
          numpy=of_logits(fn, labels, kwargs)(z),
          argument=of_logits(fn, labels, dict(kwargs, **{key: vector}))(z),
          scan=jax.lax.scan(lambda c, x: (c, closed(x)), 0.0, z[None])[1][0],
          shard_map=jax.shard_map(closed, mesh=_MESH, in_specs=P(),
                                  out_specs=P(), check_vma=False)(z))

    for way, got in ways(Z, jnp.asarray(kwargs[key])).items():
      np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7,
                                 err_msg=way)


# --------------------------------------------------------------------------
# jax_enable_x64: the logits' dtype, not float64.
# --------------------------------------------------------------------------
def float64_values(jaxpr: jax_core.Jaxpr) -> list[tuple[str, tuple]]:
  """``(primitive, shape)`` of every float64 value ``jaxpr`` computes,
  its sub-jaxprs' (jit, custom_jvp, cond, scan, ...) included."""
  found = []
  for eqn in jaxpr.eqns:
    found += [(eqn.primitive.name, v.aval.shape) for v in eqn.outvars
              if getattr(v.aval, "dtype", None) == np.float64]
    for param in eqn.params.values():
      for sub in (param if isinstance(param, (list, tuple)) else [param]):
        if isinstance(sub, jax_core.ClosedJaxpr):
          sub = sub.jaxpr
        if isinstance(sub, jax_core.Jaxpr):
          found += float64_values(sub)
  return found


def _value_and_gradient(fn, labels, kwargs):
  """``z -> (value, d sum(value) / dz)``; a ``_grad`` twin is its value."""
  loss = of_logits(fn, labels, kwargs)
  if fn.__name__.endswith("_grad"):
    return lambda z: (loss(z),)
  return lambda z: jax.value_and_grad(lambda x: jnp.sum(loss(x)))(z)


class EnableX64Test(parameterized.TestCase):
  """Under ``jax_enable_x64`` a hyperparameter is a float64 array; cast to
  the compute dtype, it must not promote the per-example arithmetic."""

  @parameterized.named_parameters(*_named(every_loss()))
  def test_logits_dtype_under_x64(self, fn):
    labels, kwargs = arguments(fn)
    for dtype in (jnp.float32, jnp.bfloat16, jnp.float16):
      z = jnp.asarray(Z, dtype)
      with jax.enable_x64(False):
        want = jax.jit(_value_and_gradient(fn, *arguments(fn)))(z)
      with jax.enable_x64(True):
        program = _value_and_gradient(fn, labels, kwargs)
        got = jax.jit(program)(z)
        leaked = [v for v in float64_values(jax.make_jaxpr(program)(z).jaxpr)
                  if B in v[1]]
      self.assertEmpty(leaked, f"{jnp.dtype(dtype).name} logits: float64 "
                       "values with a batch axis")
      eps = float(jnp.finfo(dtype).eps)
      for out, expected in zip(got, want):
        self.assertEqual(out.dtype, dtype)
        self.assertTrue(np.all(np.isfinite(np.asarray(out, np.float32))))
        expected = np.asarray(expected, np.float32)
        np.testing.assert_allclose(
            np.asarray(out, np.float32), expected, rtol=2 * eps,
            atol=2 * eps * max(1.0, float(np.max(np.abs(expected)))),
            err_msg=jnp.dtype(dtype).name)


# --------------------------------------------------------------------------
# Errors that name the argument at fault.
# --------------------------------------------------------------------------
def _scalar_hyperparameters(fn) -> list[tuple[str, np.ndarray]]:
  """``(name, a [3] array)`` for each scalar hyperparameter of ``fn``."""
  out = []
  for name, p in inspect.signature(fn).parameters.items():
    if p.kind is not p.KEYWORD_ONLY or name in ("axis", "where"):
      continue
    default = p.default
    if name == "alpha" and _loss_name(fn) == "focal_loss":
      continue  # a scalar or a per-class vector: its own shape check
    if isinstance(default, (bool, np.bool_)):
      out.append((name, np.ones(3, bool)))
    elif isinstance(default, (int, float)) or (
        default is None and name not in plain_forms_test.REQUIRED):
      out.append((name, np.full(3, 0.5 if name != "order" else 2)))
  return out


class ErrorTest(parameterized.TestCase):

  @parameterized.named_parameters(
      (f"{fn.__name__}_{name}", fn, name, value) for fn in every_loss()
      for name, value in _scalar_hyperparameters(fn))
  def test_a_hyperparameter_of_the_wrong_shape_is_named(self, fn, name,
                                                        value):
    labels, kwargs = arguments(fn)
    with self.assertRaisesRegex(ValueError, rf"`{name}` must be a scalar"):
      of_logits(fn, labels, dict(kwargs, **{name: value}))(Z)

  @parameterized.named_parameters(_named(
      f for f in every_loss() if _loss_name(f) in _family("softmax")
      and "labels" in inspect.signature(f).parameters))
  def test_logits_without_a_class_axis_are_named(self, fn):
    labels, kwargs = arguments(fn)
    with self.assertRaisesRegex(
        ValueError, r"`logits` of shape \(5,\) are read as one example"):
      of_logits(fn, labels, kwargs)(Z[:, 0])

  @parameterized.named_parameters(_named(
      f for f in every_loss() if _loss_name(f) in _family("sigmoid")))
  def test_sigmoid_targets_outside_the_unit_interval(self, fn):
    _, kwargs = arguments(fn)
    call = lambda t, **kw: fn(Z, t, **kwargs, **kw)
    with self.assertRaisesRegex(ValueError,
                                r"`labels` must be binary or soft targets "
                                r"in \[0, 1\]"):
      call(np.where(MULTI_HOT > 0.5, 2, 0))  # class indices, not targets
    with self.assertRaisesRegex(ValueError, r"`labels` of shape \(5, 1\) "
                                r"must have the logits' last axis"):
      call(Y[:, None] % 2)  # [B, 1] broadcasting over the classes
    nan = MULTI_HOT.copy()
    nan[1, 2] = np.nan
    with self.assertRaisesRegex(ValueError, r"`labels` must be"):
      call(nan)
    # Masked entries may hold anything, as everywhere.
    where = np.ones(Z.shape, bool)
    where[1, 2] = False
    padded = nan.copy()
    padded[1, 2] = 7.0
    for t in (nan, padded):
      self.assertTrue(np.all(np.isfinite(call(t, where=where))))


# --------------------------------------------------------------------------
# The API's lists.
# --------------------------------------------------------------------------
class ApiTest(absltest.TestCase):

  def test_all_is_the_public_namespace(self):
    public = {name for name, value in vars(losses).items()
              if not name.startswith("_")
              and not isinstance(value, types.ModuleType)}
    self.assertCountEqual(losses.__all__, public)
    scope = {}
    exec("from losses import *", scope)  # pylint: disable=exec-used
    self.assertContainsSubset(public, scope)

  def test_losses_lists_every_exported_loss_once(self):
    listed = [fn.__name__ for family in losses.LOSSES.values()
              for fn in family]
    self.assertCountEqual(listed, plain_forms_test.public_losses())
    self.assertCountEqual(losses.LOSSES, ("softmax", "sigmoid", "batch"))
    # Each family's output: per example, per element, a scalar.
    shapes = {"softmax": (B,), "sigmoid": (B, C), "batch": ()}
    for family, fns in losses.LOSSES.items():
      for fn in fns:
        self.assertEqual(
            jax.eval_shape(of_logits(fn, *arguments(fn)), Z).shape,
            shapes[family], fn.__name__)

  def test_public_functions_have_parameter_type_hints(self):
    missing = [f"{name}({p.name})" for name in losses.__all__
               if inspect.isfunction(getattr(losses, name))
               for p in inspect.signature(getattr(losses, name)).parameters
               .values() if p.annotation is p.empty]
    self.assertEmpty(missing)


if __name__ == "__main__":
  absltest.main()
