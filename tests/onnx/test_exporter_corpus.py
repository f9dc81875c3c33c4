"""Models made by real exporters, each through every path, against onnxruntime on the original.

The models are generated at test time: scikit-learn estimators converted by skl2onnx
(KNeighbors, RadiusNeighbors, Gaussian process, KernelPCA, LocalOutlierFactor,
KNNImputer: Scan loops, the ``ai.onnx.ml`` domain, local functions of another opset)
and onnxscript functions (``for``, ``while``, ``break``, ``if``, nested loops, a local
function, a Scan with scan outputs). Each case goes through the steps

* ``import``: :func:`mdf_loops.onnx_to_mdf`;
* ``scheduler``, ``onnxruntime``, ``auto``: :func:`mdf_loops.run` with that backend
  (``auto`` must not fall back to the scheduler);
* ``json``: the import written with ``to_json_file``, loaded back and run;
* ``export``: :func:`mdf_loops.mdf_to_onnx`, checked with ``full_check``, run by onnxruntime;
* ``torch``: :func:`mdf_loops.run` with ``backend="torch"`` (torch operations);

and each output is compared with onnxruntime on the original model (rtol 1e-4, atol
1e-5). An output that is a cancelling float32 sum (the mean of a Gaussian process fitted
without noise: terms up to 1000 that sum to values under 5) differs with the order of summation,
which each engine and device chooses: its absolute tolerance is one float32 epsilon of
the summed magnitude, element by element, computed in float64 from the fitted estimator.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

import mdf_loops
from conftest import ort_run

RTOL, ATOL = 1e-4, 1e-5
EPS32 = float(np.finfo(np.float32).eps)
STEPS = ["import", "scheduler", "onnxruntime", "auto", "json", "export", "torch"]


@dataclass(frozen=True)
class Case:
    """One exporter model and its inputs."""

    model: onnx.ModelProto
    feeds: dict
    #: output -> for each element, the sum of the magnitudes of the terms it adds up
    #: (float64), where that is much larger than the value: see :func:`_tolerance`
    summed_magnitude: dict = field(default_factory=dict)
    domains: frozenset = field(default_factory=frozenset)  # opset domains the import keeps


# ---------------------------------------------------------------- skl2onnx


def _skl2onnx(estimator, x: np.ndarray, options=None, target_opset=None) -> onnx.ModelProto:
    from skl2onnx import to_onnx

    kwargs = {"options": {id(estimator): options}} if options else {}
    if target_opset is not None:
        kwargs["target_opset"] = target_opset
    return to_onnx(estimator, x[:1], **kwargs)


def _sklearn_data():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(16, 3)).astype(np.float32)
    labels = (x[:, 0] - x[:, 2] > 0).astype(np.int64)
    target = (x @ np.array([0.5, -1.0, 2.0], np.float32)).astype(np.float32)
    return x, labels, target


def _knn_classifier() -> Case:
    from sklearn.neighbors import KNeighborsClassifier

    x, labels, _ = _sklearn_data()
    model = _skl2onnx(KNeighborsClassifier(3).fit(x, labels), x, {"zipmap": False},
                      {"": 18, "ai.onnx.ml": 3})
    return Case(model, {"X": x[:5] + 0.05}, domains=frozenset({"ai.onnx.ml"}))


def _knn_regressor() -> Case:
    from sklearn.neighbors import KNeighborsRegressor

    x, _, target = _sklearn_data()
    model = _skl2onnx(KNeighborsRegressor(4, weights="distance").fit(x, target), x,
                      target_opset={"": 18, "ai.onnx.ml": 3})
    return Case(model, {"X": x[:5] + 0.05}, domains=frozenset({"ai.onnx.ml"}))


def _radius_neighbors() -> Case:
    from sklearn.neighbors import RadiusNeighborsRegressor

    x, _, target = _sklearn_data()
    # skl2onnx marks the training points outside the radius with index -1, which
    # onnxruntime's ArrayFeatureExtractor refuses: a radius that holds them all
    estimator = RadiusNeighborsRegressor(radius=20.0, weights="distance").fit(x, target)
    model = _skl2onnx(estimator, x, target_opset={"": 18, "ai.onnx.ml": 3})
    return Case(model, {"X": x[:5] * 0.9}, domains=frozenset({"ai.onnx.ml"}))


def _gaussian_process_estimator():
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF

    x, _, target = _sklearn_data()
    # a long length scale and no noise: a kernel matrix float32 cannot invert well, so the
    # mean k(X, x_train) @ alpha sums terms up to 1000 (alpha is large) to values under 5
    return GaussianProcessRegressor(RBF(5.0), alpha=1e-10, optimizer=None).fit(x, target)


def _gaussian_process() -> Case:
    x, _, _ = _sklearn_data()
    estimator = _gaussian_process_estimator()
    model = _skl2onnx(estimator, x, target_opset={"": 18, "ai.onnx.ml": 3})
    feeds = {"X": x[:4] + 0.1}
    terms = estimator.kernel_(feeds["X"].astype(np.float64), estimator.X_train_)
    terms *= estimator.alpha_.ravel()
    return Case(model, feeds, {"GPmean": np.abs(terms).sum(axis=1, keepdims=True)})


def _gaussian_process_with_noise() -> Case:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF

    x, _, target = _sklearn_data()
    estimator = GaussianProcessRegressor(RBF(1.0), alpha=0.1, optimizer=None).fit(x, target)
    model = _skl2onnx(estimator, x, target_opset={"": 18, "ai.onnx.ml": 3})
    return Case(model, {"X": x[:4] + 0.1})


def _kernel_pca() -> Case:
    from sklearn.decomposition import KernelPCA

    x, _, _ = _sklearn_data()
    model = _skl2onnx(KernelPCA(2, kernel="rbf", gamma=0.2).fit(x), x,
                      target_opset={"": 18, "ai.onnx.ml": 3})
    return Case(model, {"X": x[:5] + 0.05})


def _local_outlier_factor() -> Case:
    from sklearn.neighbors import LocalOutlierFactor

    x, _, _ = _sklearn_data()
    model = _skl2onnx(LocalOutlierFactor(4, novelty=True).fit(x), x,
                      target_opset={"": 18, "ai.onnx.ml": 3})
    return Case(model, {"X": np.concatenate([x[:3] + 0.05, [[4.0, 4.0, 4.0]]]).astype(np.float32)})


def _knn_imputer() -> Case:
    """skl2onnx's own opset choice: local functions at an older opset than the model."""
    from sklearn.impute import KNNImputer

    x, _, _ = _sklearn_data()
    holes = np.where(np.random.default_rng(5).random(x.shape) < 0.2, np.nan, x).astype(np.float32)
    model = _skl2onnx(KNNImputer(n_neighbors=2).fit(holes), holes)
    return Case(model, {model.graph.input[0].name: holes[:8]})


# ---------------------------------------------------------------- onnxscript


def _onnxscript_functions() -> dict[str, Callable]:
    """The functions, compiled by onnxscript (which reads them from a module's source)."""
    import exporter_corpus_onnxscript as functions

    return functions.FUNCTIONS


def _onnxscript(name: str, **feeds) -> Callable[[], Case]:
    def make() -> Case:
        return Case(_onnxscript_functions()[name].to_model_proto(), feeds)
    return make


_X3 = np.array([0.5, -1.0, 2.0], np.float32)

#: name -> (the package that makes it, how)
CASES: dict[str, tuple[str, Callable[[], Case]]] = {
    "skl_kneighbors_classifier": ("skl2onnx", _knn_classifier),
    "skl_kneighbors_regressor": ("skl2onnx", _knn_regressor),
    "skl_radius_neighbors": ("skl2onnx", _radius_neighbors),
    "skl_gaussian_process": ("skl2onnx", _gaussian_process),
    "skl_gaussian_process_noise": ("skl2onnx", _gaussian_process_with_noise),
    "skl_kernel_pca": ("skl2onnx", _kernel_pca),
    "skl_local_outlier_factor": ("skl2onnx", _local_outlier_factor),
    "skl_knn_imputer": ("skl2onnx", _knn_imputer),
    "os_for": ("onnxscript", _onnxscript("for_loop", x=_X3, n=np.array(5, np.int64))),
    "os_while": ("onnxscript", _onnxscript("while_loop", x=_X3)),
    "os_break": ("onnxscript", _onnxscript("for_break", x=_X3, n=np.array(50, np.int64))),
    "os_if": ("onnxscript", _onnxscript("if_else", x=_X3)),
    "os_nested_loops": ("onnxscript", _onnxscript("nested_loops", x=_X3,
                                                  n=np.array(3, np.int64),
                                                  m=np.array(4, np.int64))),
    "os_local_function": ("onnxscript", _onnxscript("local_function", x=_X3,
                                                    n=np.array(3, np.int64))),
    "os_scan_outputs": ("onnxscript", _onnxscript(
        "scan_outputs", xs=np.arange(12, dtype=np.float32).reshape(4, 3), s0=_X3)),
}


@functools.lru_cache(maxsize=None)
def _case(name: str) -> Case:
    package, make = CASES[name]
    pytest.importorskip(package)
    if package == "skl2onnx":
        pytest.importorskip("sklearn")
    return make()


@functools.lru_cache(maxsize=None)
def _imported(name: str):
    return mdf_loops.onnx_to_mdf(_case(name).model)


@functools.lru_cache(maxsize=None)
def _oracle(name: str) -> dict:
    case = _case(name)
    return ort_run(case.model, case.feeds)


def _tolerance(case: Case, output: str):
    """The absolute tolerance of ``output``: ATOL, or, for an output that sums terms much
    larger than itself, one float32 epsilon of their summed magnitude, element by element.

    Each term carries a rounding error of up to half an epsilon of its size, and the order
    of the additions (which onnxruntime, onnx.reference, torch and JAX on a CPU or a GPU
    each choose) decides which of those errors remain, so two correct float32 engines
    differ by a fraction of epsilon * sum(|terms|): onnxruntime and onnx.reference by up to
    0.22 of it on skl_gaussian_process, JAX on an H200 GPU and onnxruntime on a CPU by at
    most 6.9e-5, under 0.18 of it. Errors in the model (a length scale 0.1% off, weights
    rounded to float16) move the values by several times the bound: see the tests at the
    end.
    """
    magnitude = case.summed_magnitude.get(output)
    return ATOL if magnitude is None else np.maximum(ATOL, EPS32 * magnitude)


def _assert_close(actual, expected, atol, where: str) -> None:
    """``assert_allclose`` (rtol RTOL), with ``atol`` a number or one per element."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    if np.ndim(atol) == 0:
        np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=atol, err_msg=where)
    else:
        np.testing.assert_array_less(np.abs(actual - expected), atol + RTOL * np.abs(expected),
                                     err_msg=f"{where}: |difference| >= atol + rtol * |expected|")


def _compare(name: str, step: str, outputs: dict) -> None:
    case = _case(name)
    expected = _oracle(name)
    assert set(outputs) == set(expected), f"outputs {sorted(outputs)} != {sorted(expected)}"
    for output, value in expected.items():
        _assert_close(outputs[output], value, _tolerance(case, output),
                      f"{name}, step {step}, output {output}")
        assert np.asarray(outputs[output]).dtype == np.asarray(value).dtype, output


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus(name, step, tmp_path, caplog):
    case = _case(name)
    if step == "import":
        imported = mdf_loops.onnx_to_mdf(case.model)
        recorded = set((imported.graphs[0].metadata or {}).get("onnx_other_opsets") or {})
        assert recorded == set(case.domains)  # ai.onnx.ml kept; local domains dropped
        return
    imported = _imported(name)
    if step in ("scheduler", "onnxruntime"):
        _compare(name, step, mdf_loops.run(imported, case.feeds, backend=step))
    elif step == "torch":
        pytest.importorskip("torch")
        _compare(name, step, mdf_loops.run(imported, case.feeds, backend="torch"))
    elif step == "auto":
        with caplog.at_level(logging.INFO, logger="mdf_loops"):
            outputs = mdf_loops.run(imported, case.feeds, backend="auto")
        assert "on the scheduler" not in caplog.text, caplog.text  # no silent fallback
        _compare(name, step, outputs)
    elif step == "json":
        path = tmp_path / f"{name}.json"
        imported.to_json_file(str(path))
        reloaded = mdf_loops.load_model(path)
        assert (reloaded.graphs[0].metadata or {}).get("onnx_other_opsets") == \
            (imported.graphs[0].metadata or {}).get("onnx_other_opsets")
        _compare(name, step, mdf_loops.run(reloaded, case.feeds, backend="scheduler"))
    else:
        exported = mdf_loops.mdf_to_onnx(imported)
        onnx.checker.check_model(exported, full_check=True)
        assert {o.domain for o in exported.opset_import} == {""} | set(case.domains)
        _compare(name, step, ort_run(exported, case.feeds))


def _gaussian_process_outputs() -> tuple[dict, dict, np.ndarray]:
    """onnxruntime's and onnx.reference's outputs of skl_gaussian_process, and the exact
    mean: scikit-learn's own prediction in float64."""
    case = _case("skl_gaussian_process")
    reference = ReferenceEvaluator(case.model).run(None, case.feeds)
    exact = _gaussian_process_estimator().predict(case.feeds["X"].astype(np.float64))
    exact = exact.reshape(-1, 1)
    return _oracle("skl_gaussian_process"), {"GPmean": reference[0]}, exact


def test_the_gaussian_process_needs_its_scaled_tolerance_and_it_holds_float32_engines():
    """Guards the tolerance: two float32 engines differ beyond the plain one, and each is
    within the scaled one of the exact (float64) mean."""
    case = _case("skl_gaussian_process")
    ort, reference, exact = _gaussian_process_outputs()
    assert not np.allclose(ort["GPmean"], reference["GPmean"], rtol=RTOL, atol=ATOL)
    bound = _tolerance(case, "GPmean")
    assert np.all(bound > ATOL)  # every element sums terms far larger than itself
    for engine in (ort, reference):
        _assert_close(engine["GPmean"], exact, bound, "a float32 engine against float64")
    _compare("skl_gaussian_process", "onnx.reference", reference)


def _with_changed_constant(model: onnx.ModelProto, op_type: str, change) -> onnx.ModelProto:
    """``model`` with the first initializer that its first ``op_type`` node reads changed."""
    changed = onnx.ModelProto()
    changed.CopyFrom(model)
    tensors = {t.name: t for t in changed.graph.initializer}
    node = next(n for n in changed.graph.node if n.op_type == op_type)
    tensor = tensors[next(name for name in node.input if name in tensors)]
    value = onnx.numpy_helper.to_array(tensor)
    tensor.CopyFrom(onnx.numpy_helper.from_array(change(value).astype(value.dtype), tensor.name))
    return changed


@pytest.mark.parametrize(
    ("op_type", "change"),
    [
        ("Div", lambda scale: scale * 1.001),  # X / length scale: the length scale 0.1% off
        ("MatMul", lambda alpha: alpha.astype(np.float16)),  # k @ alpha: alpha in float16
    ],
    ids=["length_scale", "float16_weights"],
)
def test_the_scaled_tolerance_still_fails_an_error_in_the_model(op_type, change):
    case = _case("skl_gaussian_process")
    wrong = ort_run(_with_changed_constant(case.model, op_type, change), case.feeds)
    with pytest.raises(AssertionError, match="output GPmean"):
        _compare("skl_gaussian_process", "onnxruntime", wrong)
