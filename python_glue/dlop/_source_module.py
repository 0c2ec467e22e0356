"""dlop.SourceModule: raw CUDA kernels from a source string, in the manner of PyCUDA's.

The source is compiled by libdlop's NVRTC behind its content-addressed cache (memory and disk),
loaded through the host's module table, and each kernel is a ``dlop._C.CudaKernel`` whose call
packs its arguments in C from type codes read once from the kernel's ``__global__`` declaration
(docs/source-ops.md, "SourceModule").
"""
from __future__ import annotations

import re
import threading

from . import _C
from ._errors import make

__all__ = ["SourceModule", "CompileError", "parse_kernel_signature", "type_codes"]


class CompileError(_C.InvalidArgumentError):
    """NVRTC rejected the source; ``.log`` is its log, with the line numbers of the source as
    given to SourceModule."""


# C types a scalar parameter may have, as type codes (Python's struct codes; l/L are 64-bit as
# on every CUDA platform dlop runs on). "char" is signed, as NVRTC's char is on x86-64 and ARM64.
_SCALAR_CODES = {
    "bool": "?", "char": "b", "signed char": "b", "unsigned char": "B", "int8_t": "b",
    "uint8_t": "B", "short": "h", "short int": "h", "signed short": "h", "signed short int": "h",
    "unsigned short": "H", "unsigned short int": "H", "int16_t": "h", "uint16_t": "H",
    "int": "i", "signed": "i", "signed int": "i", "unsigned": "I", "unsigned int": "I",
    "int32_t": "i", "uint32_t": "I", "long": "q", "long int": "q", "signed long": "q",
    "signed long int": "q", "unsigned long": "Q", "unsigned long int": "Q", "long long": "q",
    "long long int": "q", "signed long long": "q", "signed long long int": "q",
    "unsigned long long": "Q", "unsigned long long int": "Q", "int64_t": "q", "uint64_t": "Q",
    "size_t": "Q", "ptrdiff_t": "q", "ssize_t": "q", "intptr_t": "q", "uintptr_t": "Q",
    "float": "f", "double": "d",
}
_CODE_SIZES = {"P": 8, "?": 1, "b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4, "l": 8, "L": 8,
               "q": 8, "Q": 8, "f": 4, "d": 8}
# Words that qualify a parameter without changing how it is passed.
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "__grid_constant__",
               "register", "struct"}
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def _without_comments(source: str) -> str:
    """source with comments and string literals blanked (newlines kept, so offsets stay)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.S)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


_TYPE_WORDS = {word for ctype in _SCALAR_CODES for word in ctype.split()} | {"void"}


def _parse_parameter(text: str, position: int) -> tuple[str, str, str | None]:
    """(C type as written, parameter name, type code or None when dlop cannot pack it)."""
    text = text.split("=", 1)[0].strip()  # a default value
    tokens = re.findall(r"[A-Za-z_]\w*|\*|&", text.split("[", 1)[0])
    # The name is the last word unless that word is part of the type ("unsigned", "float *").
    name = f"p{position}"
    if (len(tokens) > 1 and _IDENTIFIER.fullmatch(tokens[-1]) and tokens[-1] not in _TYPE_WORDS
            and tokens[-1] not in _QUALIFIERS):
        name = tokens.pop()
    if "[" in text:
        tokens.append("*")  # an array parameter is a pointer
    shown = " ".join(tokens).replace("* *", "**")
    if "&" in tokens:
        return shown, name, None  # references cannot be kernel parameters
    if "*" in tokens:
        return shown, name, "P"
    return shown, name, _SCALAR_CODES.get(" ".join(t for t in tokens if t not in _QUALIFIERS))


def parse_kernel_signature(source: str, name: str):
    """The parameters of kernel ``name`` read from its ``__global__`` declaration in source:
    a list of (C type, parameter name, type code), and None; or None and why it cannot be read
    (no such declaration, a template, a parameter type dlop cannot pack)."""
    text = _without_comments(source)
    for match in re.finditer(r"\b" + re.escape(name) + r"\s*\(", text):
        # the declaration's start: after the previous ';', '{', '}' or preprocessor line
        head_start = max(text.rfind(c, 0, match.start()) for c in ";{}")
        head = text[head_start + 1: match.start()]
        head = "\n".join(line for line in head.split("\n") if not line.lstrip().startswith("#"))
        if not re.search(r"\b__global__\b", head):
            continue
        if re.search(r"\btemplate\b", head):
            return None, (f"'{name}' is a template: launch an explicit instantiation declared "
                          "extern \"C\", or declare its argument types")
        depth, end = 0, None
        for i in range(match.end() - 1, len(text)):
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        if end is None:
            return None, f"the parameter list of '{name}' is not closed"
        inside = text[match.end(): end].strip()
        if inside in ("", "void"):
            return [], None
        params = []
        for position, part in enumerate(_split_top_level(inside), start=1):
            ctype, pname, code = _parse_parameter(part, position)
            if code is None:
                return None, (f"parameter {position} '{pname}' of '{name}' has type '{ctype}', "
                              "which dlop cannot pack (pointers, integers, float and double)")
            params.append((ctype, pname, code))
        return params, None
    return None, (f"no __global__ declaration of '{name}' was found in the source (a macro or "
                  "an #include may declare it)")


def type_codes(arg_types) -> tuple[str, tuple, tuple]:
    """(codes, names, C types) for arg_types: a str of type codes ("PPPi"), or a sequence of C
    types ("float *", "const float *", "int")."""
    if isinstance(arg_types, str):
        for position, code in enumerate(arg_types, start=1):
            if code not in _CODE_TYPES:
                raise _type_error(f"arg_types: code {position} '{code}' of '{arg_types}' is not a "
                                  f"type code; expected one of {''.join(_CODE_TYPES)}")
        names = tuple(f"p{i}" for i in range(1, len(arg_types) + 1))
        types = tuple(_CODE_TYPES[c] for c in arg_types)
        return arg_types, names, types
    codes, names, types = [], [], []
    for position, ctype in enumerate(arg_types, start=1):
        if not isinstance(ctype, str):
            raise _type_error(f"arg_types: item {position} is {ctype!r}; expected a C type "
                              "(\"float *\", \"int\") or give a str of type codes (\"PPPi\")")
        shown, _, code = _parse_parameter(ctype, position)
        if code is None:
            raise _type_error(f"arg_types: item {position} '{ctype}' is not a type dlop can "
                              "pack (pointers, integers, float and double)")
        codes.append(code)
        names.append(f"p{position}")
        types.append(" ".join(ctype.split()))
    return "".join(codes), tuple(names), tuple(types)


_CODE_TYPES = {"P": "pointer", "?": "bool", "b": "signed char", "B": "unsigned char",
               "h": "short", "H": "unsigned short", "i": "int", "I": "unsigned int",
               "l": "long long", "L": "unsigned long long", "q": "long long",
               "Q": "unsigned long long", "f": "float", "d": "double"}


def _type_error(message: str) -> Exception:
    return make(_C.DlopTypeError, "DLOP_TYPE_ERROR", message)


def _invalid(message: str) -> Exception:
    return make(_C.InvalidArgumentError, "DLOP_INVALID_ARGUMENT", message)


def _parse_arch(arch) -> int | None:
    if arch is None:
        return None
    if isinstance(arch, int) and not isinstance(arch, bool):
        value = arch
    else:
        match = re.fullmatch(r"(?:sm_|compute_)?(\d+)", str(arch).strip())
        if match is None:
            raise _invalid(f"SourceModule: arch={arch!r}: expected 'sm_90', 90 or None (the "
                           "device's own); feature-specific targets ('sm_90a') are not offered")
        value = int(match.group(1))
    if not 10 <= value <= 10000:
        raise _invalid(f"SourceModule: arch={arch!r}: expected major * 10 + minor (90 for sm_90)")
    return value


def _parse_device(device) -> int:
    if isinstance(device, int) and not isinstance(device, bool):
        text = f"cuda:{device}"
    else:
        text = str(device)
    match = re.fullmatch(r"(?:cuda|gpu)(?::(\d+))?", text)
    if match is None:
        raise _invalid(f"SourceModule: device={device!r}: kernels run on a GPU; expected "
                       "'cuda', 'cuda:N' or N")
    index = int(match.group(1) or 0)
    if index > 2**31 - 1:
        raise _invalid(f"SourceModule: device={device!r}: no GPU has that index")
    return index


class SourceModule:
    """CUDA C source compiled at run time; ``get_function(name)`` gives its kernels.

    ``SourceModule(source, options=None, no_extern_c=False, arch=None, device="cuda",
    include_dirs=())``: ``options`` are NVRTC options ("-DN=4", "--use_fast_math"; the
    architecture is chosen here). Unless ``no_extern_c``, the source is wrapped in
    ``extern "C" { ... }`` so kernels keep their names (a ``#line`` directive keeps compiler
    messages on the source's own line numbers); with it, name C++ kernels by their mangled
    names or declare them ``extern "C"`` yourself. ``arch`` ("sm_90", 90) compiles without a GPU;
    without it the device's architecture is used, which needs the device. Compilation errors
    raise ``dlop.CompileError`` carrying NVRTC's log. Results are cached (``dlop.jit_stats()``).
    """

    def __init__(self, source: str, options=None, no_extern_c: bool = False, arch=None,
                 device="cuda", include_dirs=()):
        if not isinstance(source, str):
            raise _type_error(f"SourceModule: source is {type(source).__name__}; expected str")
        if isinstance(options, str):
            raise _type_error("SourceModule: options is a list of str (['-DN=4']), not one str")
        self.source = source
        self.options = tuple(options or ()) + tuple(f"-I{d}" for d in include_dirs)
        self.no_extern_c = bool(no_extern_c)
        self.device_id = _parse_device(device)
        self._module = None
        self._load_lock = threading.Lock()
        arch_value = _parse_arch(arch)
        if arch_value is None:
            try:
                arch_value = _C.cuda_device_arch(self.device_id)
            except _C.NoDeviceError as error:
                raise make(_C.NoDeviceError, "DLOP_NO_DEVICE",
                           f"SourceModule: compiling for the GPU's architecture needs a CUDA "
                           f"device: {error}; give arch='sm_90' (say) to compile without one "
                           "(loading and launching still need the GPU)") from None
        self.arch = f"sm_{arch_value}"
        # #line keeps the compiler's line numbers those of the source as given.
        self.code = source if self.no_extern_c else 'extern "C" {\n#line 1\n' + source + "\n}\n"
        try:
            self._image, self.image, self.is_ptx = _C.cuda_compile(arch_value, self.code,
                                                                   self.options)
        except _C.InvalidArgumentError as error:
            text = str(error)
            if "could not compile" not in text:
                raise
            compile_error = make(CompileError, "DLOP_INVALID_ARGUMENT", text)
            compile_error.log = text.split("its log:\n", 1)[-1]
            raise compile_error from None

    def _loaded(self) -> int:
        # the load releases the GIL: two threads must not both load (one module would leak)
        with self._load_lock:
            if self._module is None:
                self._module = _C.cuda_module_load(self.device_id, self._image)
            return self._module

    def get_function(self, name: str, arg_types=None):
        """The kernel ``name``, loaded on the module's device (which needs the GPU).

        Its argument types are read from its ``__global__`` declaration when they can be;
        ``arg_types`` declares them instead ("PPPi", or C types such as ["float *", "int"]), as
        does ``kernel.prepare(...)`` later. When the driver can tell (CUDA 12.4+), the count
        and sizes are checked against the compiled kernel.
        """
        function = _C.cuda_module_function(self._loaded(), name)
        params, why = parse_kernel_signature(self.source, name)
        kernel = _C.CudaKernel(self, function, self.device_id, name, None, (), (), why or "")
        if arg_types is not None:
            _declare(kernel, *type_codes(arg_types))
        elif params is not None:
            _declare(kernel, "".join(p[2] for p in params), tuple(p[1] for p in params),
                     tuple(p[0] for p in params), read=True)
        return kernel

    def __del__(self):
        module, self._module = getattr(self, "_module", None), None
        if module is not None:
            try:
                _C.cuda_module_unload(module)
            except Exception:  # interpreter exit, or a context lost to a fault: nothing to do
                pass


def _declare(kernel, codes: str, names: tuple, types: tuple, read: bool = False) -> None:
    """Give kernel its argument types, checked against the compiled kernel when the driver can
    tell its parameters' sizes."""
    sizes = _C.cuda_function_params(_function_of(kernel))
    if sizes is not None:
        expected = tuple(_CODE_SIZES[c] for c in codes)
        if len(sizes) != len(codes) or tuple(sizes) != expected:
            source = "read from the source" if read else "declared"
            raise make(_C.DlopTypeError, "DLOP_TYPE_ERROR",
                       f"kernel '{kernel.name}': the argument types {source} ({', '.join(types)}:"
                       f" {len(codes)} parameters of {list(expected)} bytes) do not match the "
                       f"compiled kernel ({len(sizes)} parameters of {list(sizes)} bytes): "
                       "declare them with arg_types= or prepare()")
    kernel._declare(codes, names, types)


def _function_of(kernel) -> int:
    return kernel._function


def prepare(kernel, arg_types):
    """kernel.prepare(arg_types): declare the argument types; returns the kernel."""
    _declare(kernel, *type_codes(arg_types))
    return kernel
