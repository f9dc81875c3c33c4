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
1e-5). An ill-conditioned float32 case (a Gaussian process fitted without noise) gives
onnxruntime's and numpy's rounding different answers: its scheduler steps are compared
with ``onnx.reference`` on the original instead, its onnxruntime steps with onnxruntime.
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
STEPS = ["import", "scheduler", "onnxruntime", "auto", "json", "export", "torch"]
#: steps whose numbers come from onnx.reference's kernels (through the MDF scheduler)
SCHEDULER_STEPS = {"scheduler", "json"}


@dataclass(frozen=True)
class Case:
    """One exporter model and its inputs."""

    model: onnx.ModelProto
    feeds: dict
    #: compare the scheduler's steps with onnx.reference rather than onnxruntime
    ill_conditioned: bool = False
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


def _gaussian_process() -> Case:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF

    x, _, target = _sklearn_data()
    # a long length scale and no noise: a kernel matrix float32 cannot invert well
    estimator = GaussianProcessRegressor(RBF(5.0), alpha=1e-10, optimizer=None).fit(x, target)
    model = _skl2onnx(estimator, x, target_opset={"": 18, "ai.onnx.ml": 3})
    return Case(model, {"X": x[:4] + 0.1}, ill_conditioned=True)


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
def _oracle(name: str, kind: str) -> dict:
    case = _case(name)
    if kind == "reference":
        session = ReferenceEvaluator(case.model)
        return dict(zip([o.name for o in case.model.graph.output], session.run(None, case.feeds)))
    return ort_run(case.model, case.feeds)


def _compare(name: str, step: str, outputs: dict) -> None:
    case = _case(name)
    kind = "reference" if case.ill_conditioned and step in SCHEDULER_STEPS else "onnxruntime"
    expected = _oracle(name, kind)
    assert set(outputs) == set(expected), f"outputs {sorted(outputs)} != {sorted(expected)}"
    for output, value in expected.items():
        np.testing.assert_allclose(np.asarray(outputs[output], dtype=np.float64),
                                   np.asarray(value, dtype=np.float64), rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name}, step {step}, output {output}")
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
        outputs = mdf_loops.run(imported, case.feeds, backend="torch")
        if not case.ill_conditioned:
            _compare(name, step, outputs)
        else:  # torch rounds as one of the two engines, or neither: it must match one
            try:
                _compare(name, "scheduler", outputs)
            except AssertionError:
                _compare(name, "onnxruntime", outputs)
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


def test_the_ill_conditioned_case_really_differs_between_engines():
    """Guards the choice of oracle: onnxruntime and onnx.reference disagree on it."""
    case = _case("skl_gaussian_process")
    ort = _oracle("skl_gaussian_process", "onnxruntime")
    reference = _oracle("skl_gaussian_process", "reference")
    (name,) = ort
    assert not np.allclose(ort[name], reference[name], rtol=RTOL, atol=ATOL)
    assert case.ill_conditioned
