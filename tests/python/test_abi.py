"""The ctypes mirrors against the C compiler, the error list against the
header and the library, versions."""

import ctypes
import os
import re
import subprocess

import pytest

import ember
from ember import _lib

from conftest import SOURCE_DIR


def probe():
    exe = os.environ.get("EMBER_ABI_PROBE")
    if not exe:
        pytest.skip("EMBER_ABI_PROBE not set (ctest sets it)")
    out = subprocess.run([exe], check=True, capture_output=True,
                         text=True).stdout
    return dict(line.rsplit(" ", 1) for line in out.splitlines())


def test_struct_layouts_match_c():
    c = probe()
    for name, mirror in _lib.STRUCTS.items():
        assert int(c[name]) == ctypes.sizeof(mirror), \
            "sizeof(%s): C %s, ctypes %d" % (name, c[name],
                                              ctypes.sizeof(mirror))
        c_fields = {k.split(".", 1)[1]: int(v) for k, v in c.items()
                    if k.startswith(name + ".")}
        py_fields = {f: getattr(mirror, f).offset for f, _ in mirror._fields_}
        assert py_fields == c_fields, name


def test_result_dtype_is_ember_sw_result():
    c = probe()
    assert ember.RESULT_DTYPE.itemsize == int(c["ember_sw_result"])
    for f in ember.RESULT_DTYPE.names:
        assert ember.RESULT_DTYPE.fields[f][1] == \
            int(c["ember_sw_result." + f]), f


def test_constants_match_c():
    c = probe()
    assert ember.EMBER_BLOCK_CACHE == int(c["EMBER_BLOCK_CACHE"])
    assert ember.EMBER_BLOCK_BROADCAST == int(c["EMBER_BLOCK_BROADCAST"])
    assert ember.EMBER_BLOCK_STATE == int(c["EMBER_BLOCK_STATE"])
    assert ember.EMBER_PROTOCOL_VERSION == int(c["EMBER_PROTOCOL_VERSION"])


def test_error_codes_match_header_and_library():
    path = os.path.join(SOURCE_DIR, "common", "include", "ember",
                        "ember_errors.h")
    with open(path) as f:
        header = re.findall(r"X\((E[A-Z]+),\s*(-\d+),\s*\"([^\"]*)\"\)",
                            f.read())
    assert len(header) == len(ember.CODES)
    for (name, value, text), (pname, pvalue) in zip(header, ember.CODES):
        assert (name, int(value)) == (pname, pvalue)
        assert getattr(ember, "EMBER_" + name) == int(value)
        assert _lib.text(_lib.lib.ember_errname(int(value))) == name
        assert ember.strerror(int(value)) == text
    assert ember.EMBER_EPARAM == -15


def test_error_object():
    e = ember.Error(ember.EMBER_EPARAM, "query 3: bad")
    assert isinstance(e, Exception)
    assert e.code == -15 and e.name == "EMBER_EPARAM"
    assert str(e) == "EMBER_EPARAM: invalid parameters: query 3: bad"


def test_versions():
    assert re.fullmatch(r"\d+\.\d+\.\d+", ember.version())
    want = os.environ.get("EMBER_PROJECT_VERSION")
    if want:
        assert ember.__version__ == want
        assert ember.version() == want
    assert ember.platform_kinds() == ["cpu", "opencl", "fpga-emu"]
