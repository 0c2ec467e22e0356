"""test_py_op.py — ops written in Python (dlop.Op subclasses) on the CPU: typed graph nodes,
compiled functions and eager calls through the registry, __props__ equality (one registered op
per props value), an exception raised in each stage reaching the caller chained, wrong types
and shapes from the stages, an op without make_thunk refusing CUDA, calls from threads, and an
array perform keeps after its run failing that run (a kept dlop.Array expired)."""
import threading

import numpy as np
import pytest

import dlop


class DoubleOp(dlop.Op):
    __props__ = ()

    def make_node(self, x):
        return dlop.Apply(self, [x], [x.type()])

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0] * 2


class ScaleOp(dlop.Op):
    __props__ = ("factor",)

    def __init__(self, factor):
        self.factor = factor

    def make_node(self, x):
        return dlop.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = (inputs[0] * self.factor).astype(inputs[0].dtype)


class SumDiffOp(dlop.Op):
    """Two inputs of one shape, two outputs: their sum and difference."""
    __props__ = ()

    def make_node(self, a, b):
        if a.dtype != b.dtype:
            raise dlop.DlopTypeError(f"SumDiffOp: inputs are {a.dtype} and {b.dtype}")
        return dlop.Apply(self, [a, b], [a.type(), a.type()])

    def infer_shape(self, node, input_shapes):
        if input_shapes[0] != input_shapes[1]:
            raise dlop.ShapeError(f"SumDiffOp: shapes {input_shapes[0]} and {input_shapes[1]}")
        return [input_shapes[0], input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        a, b = inputs
        output_storage[0][0] = a + b
        output_storage[1][0] = a - b


def test_graph_node_types_and_compiled_function():
    x = dlop.matrix("x", "float32")
    y = DoubleOp()(x)
    assert (y.dtype, y.shape) == ("float32", (None, None))
    f = dlop.function([x], y)
    value = np.arange(20, dtype=np.float32).reshape(4, 5)
    np.testing.assert_array_equal(f(value).numpy(), value * 2)
    # A second call with another shape: infer_shape runs on the concrete shapes.
    np.testing.assert_array_equal(f(np.ones((2, 3), np.float32)).numpy(), np.full((2, 3), 2.0))
    assert "DoubleOp" in f.explain()


def test_composes_with_plugin_ops_in_a_graph():
    x = dlop.vector("x", "float64")
    f = dlop.function([x], dlop.exp(DoubleOp()(x)) + 1)
    value = np.linspace(-1, 1, 9)
    np.testing.assert_allclose(f(value).numpy(), np.exp(value * 2) + 1, rtol=1e-15)


def test_eager_calls_on_numpy_and_dlop_arrays():
    value = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(DoubleOp()(value).numpy(), value * 2)
    np.testing.assert_array_equal(DoubleOp()(dlop.asarray(value)).numpy(), value * 2)
    strided = np.arange(12.0)[::-3]
    np.testing.assert_array_equal(DoubleOp()(strided).numpy(), strided * 2)


def test_in_the_registry_like_plugin_ops():
    DoubleOp()(np.zeros(1))
    registered = [op for op in dlop.ops if op.plugin.startswith("python_DoubleOp")]
    assert len(registered) == 1
    plugin = [p for p in dlop.plugins() if p.name == registered[0].plugin][0]
    assert plugin.path.startswith("in-process: dlop.Op ") and "DoubleOp" in plugin.path


def test_two_inputs_two_outputs():
    a, b = np.arange(4.0), np.full(4, 0.5)
    total, diff = SumDiffOp()(a, b)
    np.testing.assert_array_equal(total.numpy(), a + b)
    np.testing.assert_array_equal(diff.numpy(), a - b)
    va, vb = dlop.vector("a", "float64"), dlop.vector("b", "float64")
    f = dlop.function([va, vb], list(SumDiffOp()(va, vb)))
    got = f(a, b)
    np.testing.assert_array_equal(got[1].numpy(), a - b)


def test_props_equality_hashing_and_one_op_per_value():
    assert ScaleOp(2) == ScaleOp(2) and hash(ScaleOp(2)) == hash(ScaleOp(2))
    assert ScaleOp(2) != ScaleOp(3) and DoubleOp() == DoubleOp()
    assert ScaleOp(2) != DoubleOp()
    value = np.arange(5, dtype=np.float64)
    x = dlop.vector("x", "float64")
    first, again, other = ScaleOp(2)(x), ScaleOp(2)(x), ScaleOp(3)(x)
    assert first.owner.op is again.owner.op            # equal props: one registered op
    assert first.owner.op is not other.owner.op
    assert first.owner.op.name != other.owner.op.name
    f = dlop.function([x], [first, other])
    two, three = f(value)
    np.testing.assert_array_equal(two.numpy(), value * 2)
    np.testing.assert_array_equal(three.numpy(), value * 3)
    assert repr(ScaleOp(2)) == "ScaleOp{factor=2}"


def test_bad_props_are_refused():
    with pytest.raises(dlop.DlopTypeError, match="__props__ must be a tuple"):
        class Bad(dlop.Op):
            __props__ = "factor"

    class Unhashable(ScaleOp):
        pass
    with pytest.raises(dlop.DlopTypeError, match="not all hashable"):
        Unhashable([1, 2])(np.zeros(2))


def test_an_op_that_cannot_run_anywhere_or_has_no_type_rule():
    class NoKernel(dlop.Op):
        def make_node(self, x):
            return dlop.Apply(self, [x], [x.type()])
    with pytest.raises(dlop.DlopTypeError, match="neither perform .* nor make_thunk"):
        NoKernel()(np.zeros(2))

    class NoTypeRule(dlop.Op):
        def perform(self, node, inputs, output_storage):
            output_storage[0][0] = inputs[0]
    with pytest.raises(dlop.DlopTypeError, match="no make_node"):
        NoTypeRule()(np.zeros(2))


class Failing(dlop.Op):
    """Raises error in the stage named by where, only for some inputs, so that the op registers
    and runs once first: make_node on float32, infer_shape and perform on 3 elements or more."""
    __props__ = ("where", "error")

    def __init__(self, where, error):
        self.where, self.error = where, error

    def make_node(self, x):
        if self.where == "make_node" and x.dtype == "float32":
            raise self.error
        return dlop.Apply(self, [x], [x.type()])

    def infer_shape(self, node, input_shapes):
        if self.where == "infer_shape" and (input_shapes[0][0] or 0) >= 3:
            raise self.error
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        if self.where == "perform" and inputs[0].size >= 3:
            raise self.error
        output_storage[0][0] = inputs[0]


class UserError(Exception):
    pass


@pytest.mark.parametrize("where", ["make_node", "infer_shape", "perform"])
def test_an_exception_in_each_stage_reaches_the_caller_chained(where):
    error = UserError(f"broken {where}")
    op = Failing(where, error)
    np.testing.assert_array_equal(op(np.ones(1)).numpy(), np.ones(1))  # registers, runs
    bad = np.zeros(4, np.float32 if where == "make_node" else np.float64)
    with pytest.raises(dlop.DlopError) as info:
        op(bad)
    assert info.value.__cause__ is error
    assert f"raised UserError: broken {where}" in str(info.value)
    assert "Failing" in str(info.value)
    # In a graph and a compiled function too (sizes are known only when it runs).
    if where == "make_node":
        with pytest.raises(dlop.DlopError) as info:
            op(dlop.vector("v", "float32"))
    else:
        x = dlop.vector("x", "float64")
        f = dlop.function([x], op(x))
        np.testing.assert_array_equal(f(np.ones(2)).numpy(), np.ones(2))
        with pytest.raises(dlop.DlopError) as info:
            f(np.ones(6))
    assert info.value.__cause__ is error


@pytest.mark.parametrize("where", ["make_node", "infer_shape", "perform"])
def test_a_long_message_is_cut_and_still_chained(where):
    # Longer than the host's error buffers, with multi-byte characters where it is cut.
    error = UserError("é" * 3000)
    op = Failing(where, error)
    op(np.ones(1))
    with pytest.raises(dlop.DlopError) as info:
        op(np.zeros(4, np.float32 if where == "make_node" else np.float64))
    assert info.value.__cause__ is error
    message = str(info.value)
    assert "[pyexc" not in message and "raised UserError: éé" in message
    assert message.endswith("... (cut)") and len(message.encode()) < 1024


class WaitsThenFails(dlop.Op):
    """perform waits for the other thread to be in perform too, then raises its own error."""
    __props__ = ("barrier",)

    def __init__(self, barrier):
        self.barrier = barrier

    def make_node(self, x):
        return dlop.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        if inputs[0].size > 1:
            self.barrier.wait(timeout=30)
            raise UserError(f"thread {threading.get_ident()}")
        output_storage[0][0] = inputs[0]


def test_threads_failing_at_once_each_get_their_own_cause():
    barrier = threading.Barrier(2)
    op = WaitsThenFails(barrier)
    op(np.ones(1))
    x = dlop.vector("x", "float64")
    f = dlop.function([x], op(x))
    value = np.ones(1 << 16)  # large enough that the run releases the GIL
    results = {}

    def work():
        for _ in range(5):
            try:
                f(value)
            except dlop.DlopError as error:
                results.setdefault(threading.get_ident(), []).append(error)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2
    for ident, errors in results.items():
        assert len(errors) == 5
        for error in errors:
            assert isinstance(error.__cause__, UserError)
            assert str(error.__cause__) == f"thread {ident}"


class Labelled(DoubleOp):
    """DoubleOp with a label prop that does not change what it computes."""
    __props__ = ("label",)

    def __init__(self, label):
        self.label = label


def test_long_props_and_class_names_register():
    # The origin holds repr(props): longer than the registry's 200 bytes, it is cut.
    op = Labelled("é" * 500)
    np.testing.assert_array_equal(op(np.ones(2)).numpy(), np.full(2, 2.0))
    (plugin,) = [p for p in dlop.plugins() if "Labelled" in p.path and "éé" in p.path]
    assert plugin.path.endswith("...") and len(plugin.path.encode()) <= 200 + len("in-process: ")
    named = type("N" * 300, (DoubleOp,), {})
    np.testing.assert_array_equal(named()(np.ones(2)).numpy(), np.full(2, 2.0))


class StopEverything(BaseException):
    pass


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, StopEverything])
def test_interrupts_in_a_stage_are_raised_as_they_are(raised):
    op = Failing("perform", raised("stop"))
    op(np.ones(1))
    with pytest.raises(raised):
        op(np.zeros(4))


@pytest.mark.parametrize("raised, expected", [
    (dlop.PluginError("p"), dlop.KernelError), (dlop.DlopError("d"), dlop.KernelError),
    (dlop.UnsupportedError("u"), dlop.UnsupportedError),
    (dlop.InvalidArgumentError("i"), dlop.InvalidArgumentError)])
def test_a_make_node_error_has_one_class_at_the_first_call_and_later(raised, expected):
    op = Failing("make_node", raised)
    with pytest.raises(dlop.DlopError) as first:
        op(np.zeros(2, np.float32))  # the registration's own make_node call
    op(np.zeros(2))  # registers
    with pytest.raises(dlop.DlopError) as later:
        op(np.zeros(2, np.float32))  # through the registry's trampoline
    assert type(first.value) is type(later.value) is expected


@pytest.mark.parametrize("shape", [(2.5,), "12", (np.float64(2),)])
def test_infer_shape_sizes_must_be_integers(shape):
    class BadShape(DoubleOp):
        __props__ = ("shape",)

        def __init__(self, shape):
            self.shape = shape

        def infer_shape(self, node, input_shapes):
            return [self.shape]
    with pytest.raises(dlop.DlopTypeError, match="shape for output 0.*integer sizes"):
        BadShape(shape)(np.ones(2))


def test_infer_shape_takes_numpy_integer_sizes():
    class NumpySizes(DoubleOp):
        def infer_shape(self, node, input_shapes):
            return [tuple(None if d is None else np.int64(d) for d in input_shapes[0])]
    assert NumpySizes()(np.ones(2)).numpy().shape == (2,)


def test_builtin_exceptions_keep_their_kind():
    with pytest.raises(ValueError) as info:
        Failing("infer_shape", ValueError("bad size"))(np.zeros(3))
    assert isinstance(info.value, dlop.DlopError) and type(info.value.__cause__) is ValueError
    with pytest.raises(TypeError) as info:
        Failing("make_node", TypeError("bad dtype"))(np.zeros(3, np.float32))
    assert isinstance(info.value, dlop.DlopTypeError)


def test_wrong_types_and_shapes_from_the_stages():
    class Float64Only(DoubleOp):
        def make_node(self, x):
            if x.dtype != "float64":
                raise dlop.DlopTypeError(f"Float64Only takes float64, not {x.dtype}")
            return dlop.Apply(self, [x], [x.type()])
    with pytest.raises(dlop.DlopTypeError, match="takes float64, not int32"):
        Float64Only()(np.zeros(2, np.int32))
    with pytest.raises(dlop.DlopTypeError):
        DoubleOp()(np.zeros(2), np.zeros(2))  # make_node(self, x) called with two inputs
    with pytest.raises(dlop.ShapeError, match="shapes"):
        SumDiffOp()(np.zeros(2), np.zeros(3))

    class WrongShape(DoubleOp):
        def perform(self, node, inputs, output_storage):
            output_storage[0][0] = inputs[0][:1]

    class WrongDtype(DoubleOp):
        def perform(self, node, inputs, output_storage):
            output_storage[0][0] = inputs[0].astype(np.float32)

    class Unset(DoubleOp):
        def perform(self, node, inputs, output_storage):
            pass

    class NotANode(DoubleOp):
        def make_node(self, x):
            return [x.type()]

    class ShapeRank(DoubleOp):
        def infer_shape(self, node, input_shapes):
            return [(1, 2, 3)]
    with pytest.raises(dlop.ShapeError, match="output 0 has shape \\(1,\\)"):
        WrongShape()(np.zeros(4))
    with pytest.raises(dlop.DlopTypeError, match="output 0 is float32"):
        WrongDtype()(np.zeros(4))
    with pytest.raises(dlop.InvalidArgumentError, match="left output_storage\\[0\\]\\[0\\] None"):
        Unset()(np.zeros(4))
    with pytest.raises(dlop.DlopTypeError, match="expected dlop.Apply"):
        NotANode()(np.zeros(4))
    with pytest.raises(dlop.ShapeError, match="3 dimension"):
        ShapeRank()(np.zeros(4))


def test_perform_sees_read_only_inputs():
    class Writes(DoubleOp):
        def perform(self, node, inputs, output_storage):
            inputs[0][0] = 7
            output_storage[0][0] = inputs[0]
    value = np.zeros(3)
    with pytest.raises(dlop.DlopError) as info:
        Writes()(value)
    assert isinstance(info.value.__cause__, ValueError)  # NumPy: assignment destination is read-only
    assert value[0] == 0


def test_an_op_without_make_thunk_refuses_cuda():
    # It declares no CUDA dtypes, so the registry refuses it on CUDA, naming the op. Without a
    # usable GPU the device check refuses first, with its own error (test_gpu_py_op.py checks
    # the op's refusal on a GPU).
    x = dlop.vector("x", "float64")
    node = DoubleOp()(x)
    try:
        dlop._C.device_check("cuda:0")
        unusable = None
    except dlop.DlopError as error:
        unusable = error
    with pytest.raises(dlop.DlopError) as info:
        dlop.function([x], node, device="cuda")
    if unusable is not None:
        assert type(info.value) is type(unusable) and str(info.value) == str(unusable)
    else:
        assert "DoubleOp" in str(info.value) and "cuda" in str(info.value).lower()
    registered = [op for op in dlop.ops if op.plugin.startswith("python_DoubleOp")][0]
    assert registered.dtypes["cpu"] and not registered.dtypes.get("cuda")


def test_calls_from_threads():
    # A class no other test registered, so its first calls (the registration) race too; 2**15
    # elements and more, so each run releases the GIL and the threads' perform calls interleave
    # with the other threads' runs; all start at once.
    class Triple(dlop.Op):
        __props__ = ()

        def make_node(self, x):
            return dlop.Apply(self, [x], [x.type()])

        def perform(self, node, inputs, output_storage):
            output_storage[0][0] = inputs[0] * 3

    threads_count = 4
    barrier = threading.Barrier(threads_count)
    errors, results = [], {}

    def work(k):
        try:
            value = np.arange((1 << 15) + k, dtype=np.float64) * (k + 1)
            barrier.wait(timeout=30)
            eager = Triple()(value).numpy()
            x = dlop.vector("x", "float64")
            f = dlop.function([x], Triple()(x) + 1)
            for _ in range(5):
                results[k] = (f(value).numpy(), eager, value)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(threads_count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == threads_count
    for got, eager, value in results.values():
        np.testing.assert_array_equal(got, value * 3 + 1)
        np.testing.assert_array_equal(eager, value * 3)
    assert len([op for op in dlop.ops if op.plugin.startswith("python_Triple")]) == 1


def test_graphs_with_python_ops_are_not_saved():
    x = dlop.vector("x", "float64")
    with pytest.raises(dlop.UnsupportedError, match="'DoubleOp' is a dlop.Op written in Python"):
        dlop.dumps(dlop.function([x], DoubleOp()(x) + 1))


class Keeps(DoubleOp):
    """perform keeps what `how` says of its input (on inputs of 3 elements or more)."""
    __props__ = ("how",)
    kept = []

    def __init__(self, how):
        self.how = how

    def perform(self, node, inputs, output_storage):
        x = inputs[0]
        if x.size >= 3:
            lent = x.base.obj  # the dlop.Array the NumPy view was made from
            if self.how == "view":
                type(self).kept.append(x[1:])
            elif self.how == "array":
                type(self).kept.append(lent)
            elif self.how == "dlpack":
                type(self).kept.append(lent.__dlpack__(max_version=(1, 0)))
            elif self.how == "cycle":  # only a reference cycle holds it: collected, not kept
                cell = {"x": x}
                cell["self"] = cell
            elif self.how == "copy":
                type(self).kept.append(x.copy())
        output_storage[0][0] = x * 2


@pytest.mark.parametrize("how, what", [
    ("view", r"inputs\[0\] \(or a view of it\)"), ("array", r"inputs\[0\] \(or a view of it\)"),
    ("dlpack", r"an array it was lent \(through a DLPack export or a dlop view\)")])
def test_an_array_kept_after_perform_fails_the_run(how, what):
    # dlop takes a run's memory back when the run ends (the pool reuses it at once), so
    # something kept from it would read memory that is no longer its own.
    op = Keeps(how)
    np.testing.assert_array_equal(op(np.ones(2)).numpy(), np.full(2, 2.0))  # keeps nothing
    with pytest.raises(dlop.KernelError, match=f"Keeps.*: perform kept {what} after the run: .*"
                                               r"copy what you keep inside the run") as info:
        op(np.ones(4))
    assert info.value.__cause__ is None
    x = dlop.vector("x", "float64")
    f = dlop.function([x], op(x) + 1)
    with pytest.raises(dlop.KernelError, match=f"perform kept {what}"):
        f(np.ones(5))


def test_a_kept_dlop_array_is_expired():
    Keeps.kept.clear()
    with pytest.raises(dlop.KernelError, match="perform kept inputs"):
        Keeps("array")(np.arange(4.0))
    (kept,) = Keeps.kept
    assert repr(kept).startswith("dlop.Array(expired: lent for one run of 'Keeps")
    uses = [lambda: kept.shape, lambda: kept.dtype, lambda: len(kept), lambda: kept.numpy(),
            lambda: np.asarray(kept), lambda: memoryview(kept), lambda: kept.__dlpack__(),
            lambda: kept.__dlpack_device__(), lambda: kept.to("cpu"), lambda: dlop.asarray(kept),
            lambda: kept + 1, lambda: dlop.exp(kept), lambda: DoubleOp()(kept),
            lambda: dlop.ops.exp(kept)]  # the C eager calls, its signature remembered just below
    dlop.ops.exp(dlop.asarray(np.arange(3.0)))
    for use in uses:
        with pytest.raises(dlop.InvalidArgumentError, match="lent for one run of the Python op "
                                                            "'Keeps.*' and is gone"):
            use()


def test_what_perform_copies_or_only_a_cycle_holds_is_not_kept():
    Keeps.kept.clear()
    value = np.arange(6.0)
    for how in ("copy", "cycle"):
        np.testing.assert_array_equal(Keeps(how)(value).numpy(), value * 2)
    np.testing.assert_array_equal(Keeps.kept[0], value)  # a copy of its own stays good


class NoProps(dlop.Op):
    """No __props__: every instance is one op, as if __props__ = ()."""

    def make_node(self, x):
        return dlop.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0] + 1


def _plugins_of(cls) -> list:
    return [p for p in dlop.plugins() if f" dlop.Op {cls.__module__}.{cls.__qualname__} " in p.path]


def test_an_op_without_props_is_one_op_whatever_the_instance():
    def add_one(x):  # a new instance per call, as Theano code writes it
        return NoProps()(x)
    for _ in range(3):
        np.testing.assert_array_equal(add_one(np.zeros(2)).numpy(), np.ones(2))
    x = dlop.vector("x", "float64")
    assert add_one(x).owner.op is add_one(x).owner.op
    assert len(_plugins_of(NoProps)) == 1
    assert NoProps() == NoProps() and hash(NoProps()) == hash(NoProps())
    assert repr(NoProps()) == "NoProps"


def test_an_op_without_props_but_with_attributes_is_refused():
    # All its instances being one op, the attributes of the first would silently be the op's.
    class Scale(NoProps):
        def __init__(self, factor):
            self.factor = factor
    with pytest.raises(dlop.DlopTypeError, match=r"Scale has no __props__, .* has attributes "
                                                 r"\(factor\): name those that make the op in "
                                                 r"__props__"):
        Scale(2)(np.zeros(2))


class WithOwnMethods(dlop.Op):
    """An intermediate base defining equality, hashing, repr and call itself."""

    def __eq__(self, other):
        return isinstance(other, WithOwnMethods)

    def __hash__(self):
        return 7

    def __repr__(self):
        return "<own repr>"

    def __call__(self, *args):
        return ("own call", dlop.Op.__call__(self, *args))


def test_methods_a_base_below_dlop_op_defines_are_kept():
    class Leaf(WithOwnMethods):
        __props__ = ()

        def make_node(self, x):
            return dlop.Apply(self, [x], [x.type()])

        def perform(self, node, inputs, output_storage):
            output_storage[0][0] = inputs[0]
    assert hash(Leaf()) == 7 and repr(Leaf()) == "<own repr>"
    assert Leaf() == WithOwnMethods.__new__(WithOwnMethods)
    tag, result = Leaf()(np.ones(2))
    assert tag == "own call"
    np.testing.assert_array_equal(result.numpy(), np.ones(2))


def test_registering_from_threads_at_once(monkeypatch):
    # dlop.Op classes and dlop.elementwise ops registered from threads started together while
    # another thread loads a plugin again and again (each load refreshes dlop.ops). That
    # thread's refreshes are slowed between reading the registry and replacing dlop.ops' table,
    # so one that read the registry before an op was added would put back a table without it.
    import time
    import uuid
    tag = uuid.uuid4().hex[:8]
    plugin = next(p.path for p in dlop.plugins() if not p.path.startswith("in-process"))
    read_registry = dlop._C.op_infos
    loader = []

    def slow_for_the_loader():
        infos = read_registry()
        if threading.current_thread() in loader:
            time.sleep(0.02)
        return infos
    monkeypatch.setattr(dlop._C, "op_infos", slow_for_the_loader)
    barrier = threading.Barrier(4)
    done = threading.Event()
    errors, made = [], {}

    def python_ops(k):
        for r in range(6):
            cls = type(f"Add{tag}_{r}", (DoubleOp,), {
                "perform": lambda self, node, inputs, out, r=r: out[0].__setitem__(0, inputs[0] + r)})
            made[(k, r)] = (cls()(np.zeros(2)), np.full(2, float(r)))

    def elementwise(k):
        for r in range(3):
            op = dlop.elementwise(f"ew{tag}_{r}", f"y = x + {r}", dtypes=("float64",))
            made[(k, r)] = (op(np.zeros(2)), np.full(2, float(r)))

    def loads(k):
        loader.append(threading.current_thread())
        while not done.is_set():
            dlop.load_plugin(plugin)

    def work(k, job):
        try:
            barrier.wait(timeout=30)
            job(k)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
    threads = [threading.Thread(target=work, args=(k, job)) for k, job in
               enumerate((python_ops, python_ops, elementwise, loads))]
    for t in threads:
        t.start()
    for t in threads[:-1]:
        t.join()
    done.set()
    threads[-1].join()
    assert not errors
    assert len(made) == 2 * 6 + 3
    for got, want in made.values():
        np.testing.assert_array_equal(got.numpy(), want)
    names = [op.name for op in dlop.ops]
    assert len(names) == len(set(names))
    ours = [name for name in names if tag in name]
    assert len(ours) == 2 * 6 + 3, " ".join(ours)  # two classes of each Add name: two ops, two names
    for name in ours:  # every op is still reachable by its name, eagerly too
        getattr(dlop.ops, name)(np.zeros(2))
