"""Graphs and functions as text (dlop.dumps / loads / save / load, pickling dlop.Function):
a round trip for every bundled op gives a function computing the same values, every parameter
kind and constants survive it, and loading refuses clearly what it cannot rebuild."""
import json
import math
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import dlop

# The plugins loaded at import: the bundled ones (the tests run with DLOP_PLUGIN_PATH empty).
BUNDLED = {p.name for p in dlop.plugins()}
FIXTURE = os.path.join(os.environ.get("DLOP_FIXTURE_DIR", ""), "serialize", "param_kinds.so")

F, I, B = "float32", "int32", "bool"
# Per op: its inputs (dtype, static shape with None for unknown sizes) and parameters.  A new
# bundled op fails test_every_bundled_op_has_a_recipe until it has one here.
UNARY, BINARY = ([(F, (None, 4))], {}), ([(F, (None, 4)), (F, (4,))], {})
RECIPES = {
    **{name: UNARY for name in ("abs", "neg", "log", "sqrt", "tanh", "sigmoid", "exp",
                                "double")},
    **{name: BINARY for name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                 "multiply_them", "equal", "not_equal", "less", "less_equal",
                                 "greater", "greater_equal")},
    "where": ([(B, (None, 4)), (F, (None, 4)), (F, ())], {}),
    "cast": ([(I, (None, 4))], {"dtype": "float64"}),
    "sum": ([(F, (None, 4, 3))], {"axes": [1, 2], "keepdims": True}),
    "mean": ([(F, (None, 4))], {"axes": [0]}),
    "max": ([(I, (None, 4))], {"axes": [-1], "keepdims": False}),
    "min": ([(F, (2, None))], {}),
    "dot": ([(F, (None, 4)), (F, (4, 3))], {"allow_tf32": False}),
    "matmul": ([(F, (2, None, 4)), (F, (4, 3))], {}),
    "gemm": ([(F, (4, None)), (F, (4, 3)), (F, (3,))],
             {"alpha": 0.5, "beta": -2.0, "trans_a": True, "trans_b": False}),
    "transpose": ([(F, (None, 4, 3))], {"axes": [2, 0, 1]}),
    "dimshuffle": ([(F, (None, 4))], {"pattern": [1, -1, 0]}),
    "reshape": ([(F, (3, 4))], {"shape": [2, -1]}),
    "broadcast_to": ([(F, (4,))], {"shape": [3, 4]}),
}


def bundled_ops():
    return [op for op in dlop.ops if op.plugin in BUNDLED]


def random_value(dtype, shape, rng):
    shape = tuple(3 if d is None else d for d in shape)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-50, 50, shape).astype(dtype)
    return (rng.random(shape) * 2 + 0.25).astype(dtype)  # positive: log, sqrt, pow


def build(op):
    specs, params = RECIPES[op.name]
    inputs = [dlop.tensor(f"in{i}", dtype=d, shape=s) for i, (d, s) in enumerate(specs)]
    return inputs, op(*inputs, **params)


def test_every_bundled_op_has_a_recipe():
    names = {op.name for op in bundled_ops()}
    assert not names - set(RECIPES), f"bundled ops without a round-trip recipe: {names - set(RECIPES)}"
    assert not set(RECIPES) - names, f"recipes for ops not loaded: {set(RECIPES) - names}"


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_round_trip_of_every_bundled_op(name):
    op = getattr(dlop.ops, name)
    inputs, output = build(op)
    f = dlop.function(inputs, output)
    g = pickle.loads(pickle.dumps(f))
    assert isinstance(g, dlop.Function) and g is not f
    assert [(v.name, v.dtype, v.shape) for v in g.inputs] == [
        (v.name, v.dtype, v.shape) for v in inputs]
    assert (g.outputs.dtype, g.outputs.shape) == (output.dtype, output.shape)
    assert g.outputs.owner_op is op
    # The reloaded function's text is the original's: nothing was lost or reordered.
    assert dlop.dumps(g) == dlop.dumps(f)
    rng = np.random.default_rng(sorted(RECIPES).index(name))
    for _ in range(2):
        values = [random_value(v.dtype, v.shape, rng) for v in inputs]
        np.testing.assert_array_equal(g(*values).numpy(), f(*values).numpy())
    # The graph alone: inputs and output Variables, compiled by the caller.
    loaded_inputs, loaded_output = dlop.loads(dlop.dumps(output, inputs))
    h = dlop.function(loaded_inputs, loaded_output)
    np.testing.assert_array_equal(h(*values).numpy(), f(*values).numpy())


def test_text_is_the_documented_json():
    x = dlop.matrix("x", dtype="float64", shape=(None, 3))
    y = dlop.sum(dlop.exp(x) * 2.0, axis=1)
    doc = json.loads(dlop.dumps(dlop.function([x], y, device="cpu", fuse=False)))
    assert doc["format"] == "dlop-graph" and doc["format_version"] == 1
    assert doc["dlop_version"] == dlop.version()
    assert doc["variables"][0] == {"kind": "input", "name": "x", "dtype": "float64",
                                   "shape": [None, 3]}
    ops = [(n["op"], n["plugin"]) for n in doc["nodes"]]
    assert ops == [("exp", "exp"), ("mul", "elemwise"), ("sum", "reduce")]
    versions = {p.name: p.version for p in dlop.plugins()}
    assert all(n["plugin_version"] == versions[n["plugin"]] for n in doc["nodes"])
    assert doc["nodes"][2]["params"]["axes"] == {"kind": "ints", "value": [1]}
    constant = doc["variables"][doc["nodes"][1]["inputs"][1]]
    assert constant["kind"] == "constant" and constant["dtype"] == "float64"
    assert doc["variables"][doc["outputs"][0]]["shape"] == [None]
    assert doc["function"] == {"device": "cpu", "fuse": False, "cuda_graphs": True}
    assert doc["outputs_as_list"] is False


def test_options_device_and_output_list_survive():
    x = dlop.vector("x", dtype="float32")
    f = dlop.function([x], [dlop.exp(x), x * 3.0, x], fuse=False, cuda_graphs=False)
    g = pickle.loads(pickle.dumps(f))
    assert (g.fuse, g.cuda_graphs, g.device) == (False, False, "cpu")
    assert isinstance(g.outputs, list) and len(g.outputs) == 3 and g.outputs[2] is g.inputs[0]
    value = np.linspace(-1, 1, 7, dtype=np.float32)
    for a, b in zip(g(value), f(value)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # loads may compile for another device than the saved one (here the same: the CPU).
    assert dlop.loads(dlop.dumps(f), device="cpu").device == "cpu"


def test_constants_of_every_dtype_survive():
    x = dlop.vector("x", dtype="float32", shape=(3,))
    parts = [x]
    for dtype in ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32",
                  "float64"):
        values = np.array([1, 0, 7], dtype=dtype)
        parts.append(dlop.cast(dlop.ops.add(dlop.cast(x, dtype), values), "float32")
                     if dtype != "bool" else dlop.where(values, x, -x))
    tiny = dlop.cast(dlop.asarray(np.array([1.0078125, -3.5, 2.0 ** -130], np.float32)),
                     "bfloat16")  # 2^-130: a bfloat16 subnormal
    parts.append(dlop.cast(dlop.ops.mul(dlop.cast(x, "bfloat16"), tiny), "float32"))
    f = dlop.function([x], parts)
    g = pickle.loads(pickle.dumps(f))
    value = np.array([0.5, -2.0, 3.0], np.float32)
    for a, b in zip(g(value), f(value)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    doc = json.loads(dlop.dumps(f))
    stored = {v["dtype"]: v["stored_as"] for v in doc["variables"] if v["kind"] == "constant"}
    assert stored["bfloat16"] == "float32" and stored["int8"] == "int8"


def test_every_parameter_kind_survives():
    if not os.path.isfile(FIXTURE):
        pytest.fail(f"fixture plugin {FIXTURE} is missing: it is part of the build")
    if "fixture_param_kinds" not in dlop.ops:
        dlop.load_plugin(FIXTURE)
    op = dlop.ops.fixture_param_kinds
    assert sorted(p.kind for p in op.params) == sorted(["bool", "int", "float", "string", "ints"])
    x = dlop.vector("x", dtype="float64")
    y = op(x, negate=True, count=3, scale=0.25, mode="plus_one", offsets=[10, -2])
    z = op(x, scale=math.inf)  # non-finite floats are strings in the text
    f = dlop.function([x], [y, z])
    text = dlop.dumps(f)
    node = json.loads(text)["nodes"][0]["params"]
    assert node == {"count": {"kind": "int", "value": 3}, "mode": {"kind": "string", "value": "plus_one"},
                    "negate": {"kind": "bool", "value": True},
                    "offsets": {"kind": "ints", "value": [10, -2]},
                    "scale": {"kind": "float", "value": 0.25}}
    assert '"value": "inf"' in text
    g = dlop.loads(text)
    value = np.array([1.0, 2.0, -4.0])
    got_y, got_z = (r.numpy() for r in g(value))
    np.testing.assert_array_equal(got_y, -3 * 0.25 * value + 9)
    np.testing.assert_array_equal(got_z, math.inf * value)


def test_save_and_load_files(tmp_path):
    x = dlop.matrix("x", dtype="float64")
    f = dlop.function([x], dlop.tanh(x).T)
    path = tmp_path / "f.json"
    dlop.save(f, path)
    value = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(dlop.load(path)(value).numpy(), f(value).numpy())
    with open(path, encoding="utf-8") as handle:
        assert dlop.load(handle).node_count == f.node_count
    dlop.save(dlop.exp(x), str(tmp_path / "g.json"))
    inputs, output = dlop.load(str(tmp_path / "g.json"))
    assert [v.name for v in inputs] == ["x"] and output.owner_op is dlop.ops.exp


# ---- refusals ---------------------------------------------------------------------------------

def saved():
    x = dlop.matrix("x", dtype="float32", shape=(None, 4))
    return dlop.dumps(dlop.function([x], dlop.sum(dlop.exp(x) + 1.0, axis=1)))


def edited(change):
    doc = json.loads(saved())
    change(doc)
    return json.dumps(doc)


def test_missing_op_is_refused_naming_it():
    text = saved().replace('"op": "exp"', '"op": "no_such_op"')
    with pytest.raises(dlop.NotFoundError) as error:
        dlop.loads(text)
    message = str(error.value)
    assert "op 'no_such_op'" in message and "plugin 'exp'" in message and "1.0.0" in message
    assert error.value.status == "DLOP_NOT_FOUND"


def test_plugin_version_difference_is_refused_with_both_versions():
    def change(doc):
        doc["nodes"][0]["plugin_version"] = "9.9.9"
    with pytest.raises(dlop.PluginError) as error:
        dlop.loads(edited(change))
    message = str(error.value)
    here = {p.name: p.version for p in dlop.plugins()}["exp"]
    assert ("op 'exp'" in message and "plugin 'exp'" in message and "version 9.9.9" in message
            and f"version {here}" in message)


def test_op_from_another_plugin_is_refused():
    def change(doc):
        doc["nodes"][0]["plugin"] = "someone_elses_exp"
    with pytest.raises(dlop.PluginError, match="plugin 'someone_elses_exp'.*from plugin 'exp'"):
        dlop.loads(edited(change))


def test_types_that_differ_from_the_saved_ones_are_refused():
    def change(doc):
        doc["variables"][doc["nodes"][0]["outputs"][0]]["dtype"] = "float64"
    with pytest.raises(dlop.PluginError, match="op 'exp'.*gives float32.*recorded float64"):
        dlop.loads(edited(change))


def test_unknown_format_version_is_refused():
    def change(doc):
        doc["format_version"] = 2
    with pytest.raises(dlop.UnsupportedError, match="format version 2; .* reads version 1"):
        dlop.loads(edited(change))


@pytest.mark.parametrize("change, where", [
    (lambda d: d.update(format="something-else"), "format"),
    (lambda d: d.update(format_version="1"), "format_version"),
    (lambda d: d.pop("nodes"), "'nodes' is missing"),
    (lambda d: d["nodes"][0]["inputs"].__setitem__(0, 99), r"nodes\[0\].inputs\[0\]"),
    (lambda d: d["nodes"][2]["params"]["axes"].update(kind="complex"), "unknown parameter kind"),
    (lambda d: d["nodes"][2]["params"]["axes"].update(value=[1.5]), "is not a value of kind ints"),
    (lambda d: d["variables"][0].update(shape=[-1, 4]), "dimension -1"),
    (lambda d: d["variables"][0].update(dtype="complex64"), "not a dlop dtype"),
    (lambda d: next(v for v in d["variables"] if v["kind"] == "constant").update(data="AAAA"),
     "3 bytes; a float32 array of shape"),
    (lambda d: d["outputs"].append(0), "outputs_as_list is false"),
])
def test_corrupt_documents_are_refused_saying_where(change, where):
    with pytest.raises(dlop.InvalidArgumentError, match=where) as error:
        dlop.loads(edited(change))
    assert "not a valid dlop-graph document" in str(error.value)


@pytest.mark.parametrize("text", ["", "{", "[1, 2]", saved()[: len(saved()) // 2], b"\xff\xfe"])
def test_text_that_is_not_a_document_is_refused(text):
    with pytest.raises(dlop.InvalidArgumentError, match="not a valid dlop-graph document"):
        dlop.loads(text)


def test_param_kind_mismatch_is_refused():
    def change(doc):
        doc["nodes"][2]["params"]["keepdims"] = {"kind": "int", "value": 1}
    with pytest.raises(dlop.DlopTypeError, match="'keepdims' was saved with kind int.*declares kind bool"):
        dlop.loads(edited(change))


def test_a_process_without_the_plugin_refuses_the_pickle():
    """Pickled here (the fixture plugin loaded), unpickled in a fresh process without it, then
    in one that loads it."""
    if not os.path.isfile(FIXTURE):
        pytest.fail(f"fixture plugin {FIXTURE} is missing: it is part of the build")
    if "fixture_param_kinds" not in dlop.ops:
        dlop.load_plugin(FIXTURE)
    x = dlop.vector("x", dtype="float32")
    data = pickle.dumps(dlop.function([x], dlop.ops.fixture_param_kinds(x, count=2)))
    child = ("import pickle, sys, numpy, dlop\n"
             "if len(sys.argv) > 1: dlop.load_plugin(sys.argv[1])\n"
             "try:\n"
             "    f = pickle.loads(sys.stdin.buffer.read())\n"
             "except dlop.NotFoundError as e:\n"
             "    print('refused:', e); sys.exit(0)\n"
             "print('ran:', f(numpy.arange(3, dtype=numpy.float32)).numpy().tolist())\n")
    for extra, expect in (([], "refused: loads: the graph needs op 'fixture_param_kinds' from "
                               "plugin 'fixture_param_kinds' version 1.0.0, which is not loaded"),
                          ([FIXTURE], "ran: [0.0, 2.0, 4.0]")):
        done = subprocess.run([sys.executable, "-c", child, *extra], input=data,
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode().startswith(expect), done.stdout.decode()


def test_dumps_refuses_what_is_not_a_graph():
    with pytest.raises(dlop.DlopTypeError, match="expected a dlop.Function or dlop Variables"):
        dlop.dumps(np.zeros(3))
    x, y = dlop.vector("x"), dlop.vector("y")
    with pytest.raises(dlop.InvalidArgumentError, match="depend on input 'y'"):
        dlop.dumps(x + y, inputs=[x])
