"""mdf_loops.render (and mdf_loops/rendering/): pictures drawn by Graphviz's real ``dot`` program.

Each picture is checked as a file (PNG/PDF magic bytes, SVG parsed as XML) and by
what the SVG shows: every node id of every body at every depth, a cluster per loop
node and per body, inner clusters drawn inside outer ones, the binding edges, and
the loop attributes in the cluster labels. The node ids the picture must show are
collected here from the model file itself.
"""

from __future__ import annotations

import json
import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from modeci_mdf.mdf import Edge, Graph, InputPort, Model, Node, OutputPort

import mdf_loops
from conftest import control_flow_cases, needs_dot
from mdf_loops.cli.commands import main
from mdf_loops.render import render, to_graphviz

pytestmark = needs_dot

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SVG = "{http://www.w3.org/2000/svg}"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def body_node_ids(document: dict) -> set[str]:
    """Ids of the nodes of every body graph (``{"graph_<id>": graph}`` values), at every depth."""
    found: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and key.startswith("graph_") and isinstance(item, dict):
                    found.update(node_id for node_id, node in (item.get("nodes") or {}).items()
                                 if not _is_constant(node))
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(document)
    return found


def _is_constant(node: dict) -> bool:
    """An ``onnx::Constant`` node: drawn as a line of the node that reads it, not as a box."""
    return any(p.get("function") == "onnx::Constant" for p in (node.get("parameters") or {}).values())


def svg_texts(svg: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in svg.iter(f"{SVG}text")]


def clusters(svg: ET.Element) -> dict[str, tuple[float, float, float, float]]:
    """Bounding box of each cluster, by the Graphviz name of the cluster."""
    boxes = {}
    for group in svg.iter(f"{SVG}g"):
        if group.get("class") != "cluster":
            continue
        title = group.find(f"{SVG}title").text
        numbers = []
        for shape in group:
            numbers += [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", shape.get("d") or shape.get("points") or "")]
        xs, ys = numbers[0::2], numbers[1::2]
        boxes[title] = (min(xs), min(ys), max(xs), max(ys))
    return boxes


def edge_titles(svg: ET.Element) -> set[str]:
    return {g.find(f"{SVG}title").text for g in svg.iter(f"{SVG}g") if g.get("class") == "edge"}


def label_lines(svg: ET.Element) -> list[str]:
    """The texts of the SVG, a bold id and the rest of its line joined (``"rnn: onnx::Scan"``)."""
    lines = []
    for text in svg_texts(svg):
        if lines and text.startswith(": "):
            lines[-1] += text
        else:
            lines.append(text)
    return lines


def inside(inner, outer) -> bool:
    return outer[0] <= inner[0] and outer[1] <= inner[1] and inner[2] <= outer[2] and inner[3] <= outer[3]


@pytest.fixture(scope="module")
def loop16(tmp_path_factory) -> Path:
    """ONNX conformance case test_loop16_seq_none (a Loop whose body holds an If), as a file."""
    path = tmp_path_factory.mktemp("onnx") / "test_loop16_seq_none.onnx"
    path.write_bytes(control_flow_cases()["test_loop16_seq_none"].model.SerializeToString())
    return path


# ---------------------------------------------------------------- every example


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.stem)
def test_png_and_svg_of_every_example(example, tmp_path):
    png = render(example, tmp_path / "picture.png")
    assert png.read_bytes()[:8] == PNG_MAGIC
    svg = ET.parse(render(example, tmp_path / "picture.svg")).getroot()
    texts = set(svg_texts(svg))
    ids = body_node_ids(json.loads(example.read_text()))
    assert ids, "every example has a loop body"
    assert ids <= texts, f"missing body nodes: {sorted(ids - texts)}"


# ---------------------------------------------------------------- the leaky integrator in detail


@pytest.fixture(scope="module")
def leaky_svg(tmp_path_factory) -> ET.Element:
    path = tmp_path_factory.mktemp("svg") / "leaky.svg"
    return ET.parse(render(EXAMPLES / "leaky_integrator.json", path)).getroot()


def test_a_scan_is_a_cluster_holding_its_body(leaky_svg):
    boxes = clusters(leaky_svg)
    assert set(boxes) == {"cluster_main/integrate", "cluster_main/integrate/body"}
    assert inside(boxes["cluster_main/integrate/body"], boxes["cluster_main/integrate"])


def test_the_scan_label_names_operator_and_attributes(leaky_svg):
    texts = label_lines(leaky_svg)
    assert "integrate: onnx::Scan" in texts
    assert "num_scan_inputs = 1" in texts


def test_edges_bind_loop_inputs_to_formal_inputs_and_body_outputs_to_loop_outputs(leaky_svg):
    edges = edge_titles(leaky_svg)
    assert "main/integrate#in#x0->main/integrate/body#formal#0" in edges  # initial state
    assert "main/integrate#in#I->main/integrate/body#formal#1" in edges  # scanned input
    assert "main/integrate/body/step->main/integrate#out#x_final" in edges  # final state
    assert "main/integrate/body/step->main/integrate#out#trace" in edges  # stacked output
    assert "main/integrate/body/step->main/integrate/body#next#0" in edges  # next iteration
    texts = svg_texts(leaky_svg)
    for label in ("initial", "slices", "final", "stacked"):
        assert label in texts
    assert "x_prev" in texts and any(t.strip() == "next" for t in texts)  # the marker: next x_prev


def test_formal_inputs_show_their_role(leaky_svg):
    texts = svg_texts(leaky_svg)
    assert {"x_prev", "state 0", "I_t", "scan element 0"} <= set(texts)


# ---------------------------------------------------------------- nested control flow from ONNX


@pytest.fixture(scope="module")
def loop16_svg(loop16, tmp_path_factory) -> ET.Element:
    path = tmp_path_factory.mktemp("svg") / "loop16.svg"
    return ET.parse(render(loop16, path)).getroot()


def test_an_imported_loop_with_a_nested_if_renders_to_png(loop16, tmp_path):
    assert render(loop16, tmp_path / "loop16.png").read_bytes()[:8] == PNG_MAGIC


def test_nested_control_flow_is_drawn_as_nested_clusters(loop16_svg):
    boxes = clusters(loop16_svg)
    root = "cluster_test_loop16_seq_none/Loop_0"
    expected = [root, f"{root}/body", f"{root}/body/If_3", f"{root}/body/If_3/then_branch",
                f"{root}/body/If_3/else_branch"]
    assert set(boxes) == set(expected)
    for inner, outer in [(1, 0), (2, 1), (3, 2), (4, 2)]:
        assert inside(boxes[expected[inner]], boxes[expected[outer]]), \
            f"{expected[inner]} is not drawn inside {expected[outer]}"


def test_every_body_node_of_the_imported_model_is_shown(loop16, loop16_svg):
    document = json.loads(mdf_loops.onnx_to_mdf(loop16).to_json())
    ids = body_node_ids(document)
    assert len(ids) >= 10  # the Loop body's nodes (its Constants folded into labels), one per If branch
    assert ids <= set(svg_texts(loop16_svg))


def test_loop_and_if_labels_show_trip_count_and_conditions(loop16_svg):
    texts = label_lines(loop16_svg)
    assert "Loop_0: onnx::Loop" in texts
    assert "trip count: trip_count" in texts
    assert "condition: cond_" in texts
    assert "If_3: onnx::If" in texts
    assert "condition: optional_is_none" in texts
    assert {"iteration number", "condition", "carried 0"} <= set(texts)


def test_an_outer_scope_read_enters_the_branch_from_the_if_node(loop16_svg):
    root = "test_loop16_seq_none/Loop_0/body/If_3"
    assert f"{root}#in#opt_seq_in->{root}/else_branch/OptionalGetElement_0" in edge_titles(loop16_svg)


def test_scan_directions_appear_in_the_label(tmp_path):
    svg = ET.parse(render(EXAMPLES / "bidirectional_scan.json", tmp_path / "b.svg")).getroot()
    texts = svg_texts(svg)
    assert "scan_input_directions = [0, 1]" in texts
    assert "scan_output_directions = [0, 1]" in texts


def test_a_loop_without_trip_count_or_condition_says_so():
    body = mdf_loops.model.set_body_signature(_forever_body(), ["i", "c", "v"], ["step.c", "step.v"])
    model = _forever_model(body)
    assert "runs until the iteration limit" in to_graphviz(model).source


def _forever_body():
    from modeci_mdf.mdf import Graph, InputPort, Node, OutputPort

    step = Node(id="step", input_ports=[InputPort(id="i"), InputPort(id="c"), InputPort(id="v")],
                output_ports=[OutputPort(id="c", value="c"), OutputPort(id="v", value="v + 1")])
    return Graph(id="forever_body", nodes=[step])


def _forever_model(body):
    from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter

    node = Node(id="forever", input_ports=[InputPort(id="v0")],
                parameters=[Parameter(id="body", value=mdf_loops.model.wrap_body(body)),
                            Parameter(id="forever", function="onnx::Loop", args={"v_initial": "[v0]"})],
                output_ports=[OutputPort(id="v", value="forever[0]")])
    return Model(id="forever_model", graphs=[Graph(id="main", nodes=[node])])


# ---------------------------------------------------------------- formats and failures


def test_pdf_output(tmp_path):
    assert render(EXAMPLES / "leaky_integrator.json", tmp_path / "x.pdf").read_bytes()[:5] == b"%PDF-"


def test_an_unknown_extension_is_refused(tmp_path):
    with pytest.raises(mdf_loops.MdfLoopsError, match=r"x\.jpg: cannot tell the picture format; use one of \.png, \.svg, \.pdf"):
        render(EXAMPLES / "leaky_integrator.json", tmp_path / "x.jpg")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_drawing_leaves_the_earlier_file_intact(tmp_path):
    target = tmp_path / "picture.svg"
    target.write_text("earlier")
    model = mdf_loops.load_model(EXAMPLES / "leaky_integrator.json")
    model.graphs[0].nodes[0].parameters = [p for p in model.graphs[0].nodes[0].parameters if p.id != "body"]
    with pytest.raises(mdf_loops.errors.ModelError, match="node 'integrate': onnx::Scan needs a 'body' parameter"):
        render(model, target)
    assert target.read_text() == "earlier"
    assert [p.name for p in tmp_path.iterdir()] == ["picture.svg"]


def test_without_dot_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(mdf_loops.MdfLoopsError, match="apt-get install graphviz"):
        render(EXAMPLES / "leaky_integrator.json", tmp_path / "x.png")


def test_a_graph_that_does_not_exist():
    with pytest.raises(mdf_loops.MdfLoopsError, match="has no graph 'other'"):
        to_graphviz(EXAMPLES / "leaky_integrator.json", graph="other")


# ---------------------------------------------------------------- what the pictures say


def _dot(name: str) -> str:
    return to_graphviz(EXAMPLES / f"{name}.json").source


def _position(source: str, fragment: str) -> int:
    assert fragment in source, fragment
    return source.index(fragment)


def test_each_next_marker_names_the_state_it_feeds():
    source = _dot("lstm_cell")
    # the new h and the new c each end at a marker naming their state, drawn at the body's foot
    assert "next <b>h_prev</b><br/><font point-size='9'>state 0</font>" in source
    assert "next <b>c_prev</b><br/><font point-size='9'>state 1</font>" in source
    assert re.search(r'"main/lstm/body/hidden" -> "main/lstm/body#next#0"', source)
    assert re.search(r'"main/lstm/body/cell" -> "main/lstm/body#next#1"', source)
    assert "rank=max" in source
    # no edge runs back up from a body node to a formal input
    assert not re.search(r'"main/lstm/body/\w+" -> "main/lstm/body#formal#', source)


def test_formal_inputs_are_drawn_in_their_declared_order():
    source = _dot("lstm_cell")  # formal inputs h_prev, c_prev, x_t
    assert re.search(r'"main/lstm/body#formal#0" -> "main/lstm/body#formal#1" \[style=invis\]', source)
    assert re.search(r'"main/lstm/body#formal#1" -> "main/lstm/body#formal#2" \[style=invis\]', source)
    assert _position(source, "<b>h_prev</b>") < _position(source, "<b>c_prev</b>") \
        < _position(source, "<b>x_t</b>")
    nested = _dot("nested_trials")  # the loop's input ports in their declared order too
    assert re.search(r'"main/trials#in#x_init" -> "main/trials#in#stimuli" \[style=invis\]', nested)


def test_long_expressions_are_wrapped_not_cut():
    source = _dot("lstm_cell")
    assert "..." not in source
    assert "i = 1 / (1 + numpy.exp(-(W_i @ x_t + U_i @<br/>    h_prev + b_i)))" in source


def test_matrices_are_shown_by_dtype_and_shape():
    source = _dot("lstm_cell")
    assert "W_i = float64[4, 2]" in source and "U_i = float64[4, 4]" in source


def test_parallel_edges_share_one_label():
    source = _dot("lstm_cell")
    assert re.search(r'"main/lstm/body/gates" -> "main/lstm/body/cell" \[label="i, f, g"\]', source)


def test_constants_are_folded_into_the_node_that_reads_them():
    source = _dot("nested_trials")
    assert "main/constants" not in source  # no box for the node of constants
    assert "tau = 1" in source  # shown on the loop's input port that reads it
    imported = to_graphviz(EXAMPLES / "theano_power.json").source
    assert "constantofshape" in imported and "value = float32[1] [1.0]" in imported


def test_a_loop_parameter_read_in_the_body_has_an_edge_to_where_it_is_read():
    from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter

    step = Node(id="step", input_ports=[InputPort(id="s"), InputPort(id="x"), InputPort(id="gain")],
                output_ports=[OutputPort(id="s_next", value="s + gain * x")])
    body = Graph(id="scaled_sum", nodes=[step])
    mdf_loops.model.set_body_signature(body, ["s", "x"], ["step.s_next"], outer_scope_inputs=["gain"])
    node = Node(id="total", input_ports=[InputPort(id="s0"), InputPort(id="xs")],
                parameters=[Parameter(id="gain", value=2.5),
                            Parameter(id="body", value=mdf_loops.model.wrap_body(body)),
                            Parameter(id="num_scan_inputs", value=1),
                            Parameter(id="total", function="onnx::Scan",
                                      args={"initial_state_and_scan_inputs": "[s0, xs]"})],
                output_ports=[OutputPort(id="s", value="total[0]")])
    source = to_graphviz(Model(id="m", graphs=[Graph(id="main", nodes=[node])])).source
    assert "gain = 2.5" in source
    assert re.search(r'"main/total#parameter#gain" -> "main/total/body/step" \[style=dotted\]', source)


# ---------------------------------------------------------------- bounds: size and wall time


def fake_dot(folder: Path, script: str, monkeypatch) -> Path:
    """A ``dot`` program running ``script`` (sh), first on the PATH."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    program = bin_dir / "dot"
    program.write_text("#!/bin/sh\n" + script)
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return program


def wide_model(nodes: int, edges: int) -> Model:
    """A valid graph of ``nodes`` nodes and ``edges`` edges, each from a node to a later one."""
    graph = Graph(id="wide")
    for i in range(nodes):
        graph.nodes.append(
            Node(id=f"n{i}", input_ports=[InputPort(id="x")], output_ports=[OutputPort(id="y", value="x")])
        )
    for k in range(edges):
        tail = k % (nodes - 1)
        head = tail + 1 + (k * 7) % (nodes - 1 - tail)
        graph.edges.append(Edge(id=f"e{k}", sender=f"n{tail}", sender_port="y", receiver=f"n{head}", receiver_port="x"))
    return Model(id="wide_model", graphs=[graph])


def document_items(document: dict) -> int:
    """Nodes and edges of the first graph of an MDF document and of every body in it."""
    (graph,) = list(document.values())[0]["graphs"].values()
    total = 0

    def walk(value) -> None:
        nonlocal total
        if isinstance(value, dict):
            if isinstance(value.get("nodes"), dict):
                total += len(value["nodes"]) + len(value.get("edges") or {})
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(graph)
    return total


def test_a_large_model_is_refused_before_dot_starts(tmp_path, monkeypatch):
    marker = tmp_path / "dot-started"
    fake_dot(tmp_path, f"touch {marker}\n", monkeypatch)
    target = tmp_path / "wide.svg"
    started = time.monotonic()
    with pytest.raises(
        mdf_loops.errors.ResourceLimitError,
        match=r"graph 'wide' of model 'wide_model' has 1000 nodes and 24000 edges .*"
        r"over the drawing limit of 2000 .*max_drawn_items.*limits\(max_drawn_items=N\).*mdf_loops.render\(..., max_drawn_items=N\)",
    ):
        render(wide_model(1000, 24000), target)
    assert time.monotonic() - started < 30  # generous: Graphviz would need minutes
    assert not marker.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["bin"]


def test_body_nodes_and_edges_count_against_the_limit(tmp_path):
    example = EXAMPLES / "nested_trials.json"
    document = json.loads(example.read_text())
    total = document_items(document)
    top = list(list(document.values())[0]["graphs"].values())[0]
    assert len(top["nodes"]) + len(top.get("edges") or {}) < total - 1  # the bodies add items
    with pytest.raises(mdf_loops.errors.ResourceLimitError, match=rf"limit of {total - 1} nodes"):
        render(example, tmp_path / "x.svg", max_drawn_items=total - 1)
    assert not (tmp_path / "x.svg").exists()
    with mdf_loops.safety.limits(max_drawn_items=total):  # the block form reaches render too
        assert render(example, tmp_path / "x.svg").read_bytes().startswith(b"<?xml")


def test_a_dot_that_hangs_is_stopped_and_nothing_is_written(tmp_path, monkeypatch):
    children = tmp_path / "children"
    fake_dot(tmp_path, f"sleep 60 &\necho $! > {children}\nwait\n", monkeypatch)
    target = tmp_path / "leaky.png"
    started = time.monotonic()
    with pytest.raises(
        mdf_loops.errors.ResourceLimitError,
        match=r"leaky\.png: Graphviz's dot was still laying out the picture after 1 s and was stopped "
        r"\(max_program_seconds\); nothing was written.*limits\(max_program_seconds=N\)",
    ):
        render(EXAMPLES / "leaky_integrator.json", target, max_program_seconds=1)
    assert time.monotonic() - started < 30  # not the 60 s of the fake dot
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "children"]  # no picture, no .part
    assert _ends(int(children.read_text()))  # what dot started ended too


def _ends(pid: int, seconds: float = 10.0) -> bool:
    """Whether process ``pid`` is gone or a zombie within ``seconds``: a process killed
    closes its pipes before the kernel marks it a zombie, so a reader can see it running
    for a moment after the end of its output."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + seconds
    while True:
        try:
            if stat.read_text().split(")")[1].split()[0] == "Z":
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def test_a_failing_dot_gives_its_last_line(tmp_path, monkeypatch):
    fake_dot(tmp_path, "echo 'Error: out of memory' >&2\nexit 3\n", monkeypatch)
    with pytest.raises(mdf_loops.MdfLoopsError, match=r"x\.svg: Graphviz failed: Error: out of memory$"):
        render(EXAMPLES / "leaky_integrator.json", tmp_path / "x.svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]


def test_the_command_stops_a_hanging_dot_with_one_line(tmp_path, monkeypatch, capsys):
    fake_dot(tmp_path, "exec sleep 60\n", monkeypatch)
    target = tmp_path / "leaky.svg"
    status = main(["render", str(EXAMPLES / "leaky_integrator.json"), "-o", str(target), "--max-program-seconds", "1"])
    captured = capsys.readouterr()
    assert status == 1 and captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"mdf-loops: error: {target}: Graphviz's dot was still laying out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]


def test_the_command_raises_the_size_limit_when_asked(tmp_path, monkeypatch, capsys):
    example = EXAMPLES / "nested_trials.json"
    total = document_items(json.loads(example.read_text()))
    target = tmp_path / "nested.svg"
    arguments = ["render", str(example), "-o", str(target), "--max-drawn-items"]
    assert main([*arguments, str(total - 1)]) == 1
    assert f"over the drawing limit of {total - 1} nodes and edges" in capsys.readouterr().err
    assert not target.exists()
    assert main([*arguments, str(total)]) == 0 and target.exists()
