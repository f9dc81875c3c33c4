"""The ``ai.onnx.ml`` domain end to end: import, the scheduler (onnx.reference's ML kernels),
the onnxruntime backend, export with the domain's opset kept, and the JSON round trip.

The models are made at test time by skl2onnx from small scikit-learn estimators; each
output is compared with onnxruntime running the original model.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnx import helper as oh

import mdf_loops
from conftest import FLOAT, assert_same, onnx_model, ort_run, value_info
from mdf_loops.errors import ModelError

RTOL, ATOL = 1e-4, 1e-5


def _estimators():
    """name -> (fitted estimator, input array, skl2onnx options)."""
    pytest.importorskip("skl2onnx")
    pytest.importorskip("sklearn")
    return _fitted()


@functools.lru_cache(maxsize=1)
def _fitted():
    """Small data, fast to fit; fitted once per session."""
    from sklearn import impute, linear_model, preprocessing, svm, tree

    rng = np.random.default_rng(7)
    x = rng.normal(size=(30, 3)).astype(np.float32)
    labels = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    target = (x @ np.array([1.0, -2.0, 0.5], np.float32)).astype(np.float32)
    holes = np.where(rng.random(x.shape) < 0.2, np.nan, x).astype(np.float32)
    categories = rng.integers(0, 3, size=(30, 2)).astype(np.int64)
    no_zipmap = {"zipmap": False}
    return {
        "Scaler": (preprocessing.StandardScaler().fit(x), x, None),
        "Normalizer": (preprocessing.Normalizer().fit(x), x, None),
        "Binarizer": (preprocessing.Binarizer(threshold=0.1).fit(x), x, None),
        "Imputer": (impute.SimpleImputer().fit(holes), holes, None),
        "OneHotEncoder": (preprocessing.OneHotEncoder(sparse_output=False).fit(categories),
                          categories, None),
        "LinearRegressor": (linear_model.LinearRegression().fit(x, target), x, None),
        "LinearClassifier": (linear_model.LogisticRegression().fit(x, labels), x, no_zipmap),
        "SVMRegressor": (svm.SVR().fit(x, target), x, None),
        "SVMClassifier": (svm.SVC().fit(x, labels), x, no_zipmap),
        "TreeEnsembleRegressor": (tree.DecisionTreeRegressor(max_depth=3).fit(x, target), x, None),
        "TreeEnsembleClassifier": (tree.DecisionTreeClassifier(max_depth=3).fit(x, labels), x,
                                   no_zipmap),
    }


ESTIMATORS = ["Scaler", "Normalizer", "Binarizer", "Imputer", "OneHotEncoder", "LinearRegressor",
              "LinearClassifier", "SVMRegressor", "SVMClassifier", "TreeEnsembleRegressor",
              "TreeEnsembleClassifier"]


def _converted(name: str):
    from skl2onnx import to_onnx

    estimator, x, options = _estimators()[name]
    kwargs = {"options": {id(estimator): options}} if options else {}
    model = to_onnx(estimator, x[:1], target_opset={"": 18, "ai.onnx.ml": 3}, **kwargs)
    return model, {model.graph.input[0].name: x[:6]}


def _ml_ops(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in model.graph.node if n.domain == "ai.onnx.ml"}


def _compare(outputs: dict, expected: dict) -> None:
    assert set(outputs) == set(expected)
    for name, value in expected.items():
        assert_same(outputs[name], value, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_ml_operator_on_every_path(name, tmp_path):
    model, feeds = _converted(name)
    assert name in _ml_ops(model)  # the operator under test is really in the model
    expected = ort_run(model, feeds)
    ml_opset = {o.domain: o.version for o in model.opset_import}["ai.onnx.ml"]
    imported = mdf_loops.onnx_to_mdf(model)
    assert imported.graphs[0].metadata["onnx_other_opsets"] == {"ai.onnx.ml": ml_opset}
    assert any(p.function == f"onnxml::{name}" for n in imported.graphs[0].nodes
               for p in n.parameters)

    _compare(mdf_loops.run(imported, feeds, backend="scheduler"), expected)
    _compare(mdf_loops.run(imported, feeds, backend="onnxruntime"), expected)

    exported = mdf_loops.mdf_to_onnx(imported)
    assert {(o.domain, o.version) for o in exported.opset_import} == {("", 18),
                                                                      ("ai.onnx.ml", ml_opset)}
    _compare(ort_run(exported, feeds), expected)

    path = tmp_path / "model.json"
    imported.to_json_file(str(path))
    reloaded = mdf_loops.load_model(path)
    assert reloaded.graphs[0].metadata["onnx_other_opsets"] == {"ai.onnx.ml": ml_opset}
    _compare(mdf_loops.run(reloaded, feeds, backend="scheduler"), expected)
    _compare(ort_run(mdf_loops.mdf_to_onnx(reloaded), feeds), expected)


def test_ml_functions_are_registered_next_to_the_default_domain():
    from mdf_loops.backends.scheduler.registry import registered_functions

    mdf_loops.register()
    names = registered_functions()
    assert "onnx::Add" in names and "onnxml::Scaler" in names and "onnxml::TreeEnsemble" in names


def test_a_hand_written_ml_call_exports_with_the_newest_ml_opset():
    """An MDF model with an ``onnxml::`` function and no recorded opset: the exporter
    declares the domain at the newest opset the installed onnx knows."""
    node = oh.make_node("Scaler", ["x"], ["y"], domain="ai.onnx.ml", offset=[1.0, 2.0],
                        scale=[2.0, 0.5])
    model = onnx_model([node], [value_info("x", FLOAT, [None, 2])],
                       [value_info("y", FLOAT, [None, 2])], extra_opsets={"ai.onnx.ml": 1})
    imported = mdf_loops.onnx_to_mdf(model)
    del imported.graphs[0].metadata["onnx_other_opsets"]
    exported = mdf_loops.mdf_to_onnx(imported)
    ml = [o.version for o in exported.opset_import if o.domain == "ai.onnx.ml"]
    assert ml == [onnx.defs.C.schema_version_map()["ai.onnx.ml"][1]]
    x = np.array([[1.0, 2.0], [3.0, -4.0]], np.float32)
    expected = (x - np.array([1.0, 2.0], np.float32)) * np.array([2.0, 0.5], np.float32)
    assert_same(ort_run(exported, {"x": x})["y"], expected)
    assert_same(mdf_loops.run(imported, {"x": x}, backend="scheduler")["y"], expected)


def test_an_ml_operator_without_a_reference_kernel_is_a_clear_error():
    """CategoryMapper is in ai.onnx.ml, but onnx.reference has no kernel for it."""
    node = oh.make_node("CategoryMapper", ["x"], ["y"], domain="ai.onnx.ml",
                        cats_int64s=[1, 2], cats_strings=["a", "b"], default_string="?")
    model = onnx_model([node], [value_info("x", onnx.TensorProto.INT64, [2])],
                       [value_info("y", onnx.TensorProto.STRING, [2])],
                       extra_opsets={"ai.onnx.ml": 1})
    imported = mdf_loops.onnx_to_mdf(model)
    with pytest.raises(ModelError, match="onnxml::CategoryMapper.*no implementation"):
        mdf_loops.run(imported, {"x": np.array([1, 2])}, backend="scheduler")


# ------------------------------------------------ ZipMap: skl2onnx's classifiers by default


@functools.lru_cache(maxsize=1)
def _classifiers():
    """Classifiers converted with skl2onnx's default options: each ends in a ZipMap."""
    from sklearn import linear_model, tree
    from skl2onnx import to_onnx

    rng = np.random.default_rng(11)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    numbers = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)
    words = np.array(["low", "mid", "high"])[numbers]
    fitted = {
        "int64 labels": linear_model.LogisticRegression().fit(x, numbers),
        "string labels": tree.DecisionTreeClassifier(max_depth=3).fit(x, words),
    }
    return {name: (to_onnx(estimator, x[:1], target_opset={"": 18, "ai.onnx.ml": 3}), x[:7])
            for name, estimator in fitted.items()}


def _same_maps(actual: list, expected: list) -> None:
    """A sequence of {label: score} maps: the same labels, in order, and close scores."""
    assert isinstance(actual, list) and len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert list(got) == list(want)
        np.testing.assert_allclose([float(v) for v in got.values()], list(want.values()),
                                   rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("labels", ["int64 labels", "string labels"])
@pytest.mark.parametrize("backend", ["scheduler", "auto"])
def test_a_classifier_ending_in_zipmap_gives_onnxruntimes_answer(labels, backend):
    pytest.importorskip("skl2onnx")
    model, x = _classifiers()[labels]
    assert "ZipMap" in _ml_ops(model)
    feeds = {model.graph.input[0].name: x}
    expected = ort_run(model, feeds)  # the oracle: onnxruntime on skl2onnx's model
    outputs = mdf_loops.run(mdf_loops.onnx_to_mdf(model), feeds, backend=backend)
    assert set(outputs) == set(expected) == {"output_label", "output_probability"}
    # string labels: numpy text here, onnxruntime's object arrays there; the same values
    assert np.asarray(outputs["output_label"]).tolist() == expected["output_label"].tolist()
    _same_maps(outputs["output_probability"], expected["output_probability"])


def test_zipmap_of_the_wrong_number_of_columns_names_the_node():
    seq = oh.make_sequence_type_proto(oh.make_map_type_proto(onnx.TensorProto.INT64,
                                                             oh.make_tensor_type_proto(FLOAT, [])))
    node = oh.make_node("ZipMap", ["p"], ["z"], domain="ai.onnx.ml", classlabels_int64s=[0, 1])
    model = onnx_model([node], [value_info("p", FLOAT, [None, None])],
                       [oh.make_value_info("z", seq)], extra_opsets={"ai.onnx.ml": 1})
    imported = mdf_loops.onnx_to_mdf(model)
    probabilities = np.array([[0.25, 0.75], [1.0, 0.0]], np.float32)
    out = mdf_loops.run(imported, {"p": probabilities}, backend="scheduler")
    _same_maps(out["z"], [{0: 0.25, 1: 0.75}, {0: 1.0, 1: 0.0}])  # numpy's rows, by hand
    with pytest.raises(mdf_loops.errors.EvaluationError, match=r"ZipMap.*\[N, 2\].*\[2, 3\]"):
        mdf_loops.run(imported, {"p": np.ones((2, 3), np.float32)}, backend="scheduler")


# ------------------------------------------------ operators skl2onnx did not write above

INT64 = onnx.TensorProto.INT64


def _tree_ensemble_node():
    """TreeEnsemble (ai.onnx.ml 5): one tree, x[0] <= 0.5 ? 1.0 : (x[1] <= 0 ? 2.0 : 3.0)."""
    return oh.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml",
        aggregate_function=1, post_transform=0, n_targets=1,
        tree_roots=[0], nodes_modes=oh.make_tensor("m", onnx.TensorProto.UINT8, [2], [0, 0]),
        nodes_featureids=[0, 1],
        nodes_splits=oh.make_tensor("s", FLOAT, [2], [0.5, 0.0]),
        nodes_truenodeids=[0, 1], nodes_trueleafs=[1, 1],
        nodes_falsenodeids=[1, 2], nodes_falseleafs=[0, 1],
        leaf_targetids=[0, 0, 0],
        leaf_weights=oh.make_tensor("w", FLOAT, [3], [1.0, 2.0, 3.0]))


HAND_BUILT = {
    # name: (nodes, inputs, outputs, ml opset, feeds, numpy oracle)
    "ArrayFeatureExtractor": (
        [oh.make_node("ArrayFeatureExtractor", ["x", "k"], ["y"], domain="ai.onnx.ml")],
        [value_info("x", FLOAT, [2, 4]), value_info("k", INT64, [2])],
        [value_info("y", FLOAT, [2, 2])], 3,
        {"x": np.arange(8, dtype=np.float32).reshape(2, 4), "k": np.array([3, 1])},
        lambda f: f["x"][:, f["k"]]),
    "FeatureVectorizer": (
        [oh.make_node("FeatureVectorizer", ["a", "b"], ["y"], domain="ai.onnx.ml",
                      inputdimensions=[2, 1])],
        [value_info("a", FLOAT, [3, 2]), value_info("b", FLOAT, [3, 1])],
        [value_info("y", FLOAT, [3, 3])], 3,
        {"a": np.arange(6, dtype=np.float32).reshape(3, 2), "b": np.ones((3, 1), np.float32)},
        lambda f: np.concatenate([f["a"], f["b"]], axis=1)),
    "LabelEncoder": (
        [oh.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                      keys_int64s=[1, 2, 3], values_int64s=[10, 20, 30], default_int64=-1)],
        [value_info("x", INT64, [4])], [value_info("y", INT64, [4])], 2,
        {"x": np.array([3, 1, 7, 2])},
        lambda f: np.array([30, 10, -1, 20])),
    "TreeEnsemble": (
        [_tree_ensemble_node()], [value_info("x", FLOAT, [3, 2])],
        [value_info("y", FLOAT, [3, 1])], 5,
        {"x": np.array([[0.0, 0.0], [1.0, -1.0], [1.0, 1.0]], np.float32)},
        lambda f: np.array([[1.0], [2.0], [3.0]], np.float32)),
}


@pytest.mark.parametrize("name", sorted(HAND_BUILT))
def test_hand_built_ml_operator_on_every_path(name):
    nodes, inputs, outputs, ml_opset, feeds, oracle = HAND_BUILT[name]
    model = onnx_model(nodes, inputs, outputs, opset=18, extra_opsets={"ai.onnx.ml": ml_opset})
    expected = {"y": np.asarray(oracle(feeds))}
    _compare(ort_run(model, feeds), expected)  # onnxruntime agrees with numpy
    imported = mdf_loops.onnx_to_mdf(model)
    _compare(mdf_loops.run(imported, feeds, backend="scheduler"), expected)
    _compare(mdf_loops.run(imported, feeds, backend="onnxruntime"), expected)
    exported = mdf_loops.mdf_to_onnx(imported)
    assert ("ai.onnx.ml", ml_opset) in {(o.domain, o.version) for o in exported.opset_import}
    _compare(ort_run(exported, feeds), expected)
