"""darknet .cfg text for the cnn accelerator (accelerators/cnn/cnn_cfg.c
reads it): a network as a list of layer dicts and back.

    [{"type": "net", "height": 28, "width": 28, "channels": 1},
     {"type": "connected", "output": 10, "activation": "linear"},
     {"type": "softmax"}]

is

    [net]
    height=28
    width=28
    channels=1

    [connected]
    output=10
    activation=linear

    [softmax]

Only the syntax is checked here (names, values that fit on a line); which
sections and keys a network may have, and their ranges, is the library's
business (ember.train raises ember.Error EMBER_EPARAM or EMBER_EFORMAT,
with the line).
"""

import numbers
import re

import numpy as np

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INT = re.compile(r"[+-]?[0-9]+\Z")
NET_SECTIONS = ("net", "network")   # darknet's name and its alias


def _value_text(value, where):
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        v = float(value)
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError("%s: %r is not a finite number" % (where, value))
        return repr(v)
    if isinstance(value, str):
        v = value.strip()
        if not v or any(ch in v for ch in "\n\r\0;"):
            raise ValueError("%s: %r is not a value a .cfg line can hold"
                             % (where, value))
        return v
    raise TypeError("%s must be an int, a float or a str, not %s"
                    % (where, type(value).__name__))


def cfg_from_layers(layers):
    """The darknet .cfg text of a network given as a list of dicts, one per
    section in order: "type" names the section ("net" first, then
    "convolutional", "maxpool", "avgpool", "connected", "dropout",
    "softmax"; accelerators/cnn/cnn_net.h has their keys), every other item
    is a key=value line (ints, floats, str; True/False as 1/0).

        text = ember.cfg_from_layers([
            {"type": "net", "height": 28, "width": 28, "channels": 1,
             "batch": 64, "learning_rate": 0.01},
            {"type": "convolutional", "filters": 20, "size": 5,
             "activation": "relu"},
            {"type": "maxpool", "size": 2, "stride": 2},
            {"type": "connected", "output": 10, "activation": "linear"},
            {"type": "softmax"}])

    Raises TypeError or ValueError for what cannot be written as a .cfg
    (a key or type that is not a name, a value with a newline, a network
    that does not begin with [net]).
    """
    if isinstance(layers, (str, bytes)) or not hasattr(layers, "__iter__"):
        raise TypeError("layers must be a list of dicts, not %s"
                        % type(layers).__name__)
    layers = list(layers)
    if not layers:
        raise ValueError("layers is empty: a network begins with "
                         "{'type': 'net', ...}")
    out = []
    for i, layer in enumerate(layers):
        where = "layers[%d]" % i
        if not hasattr(layer, "items"):
            raise TypeError("%s must be a dict, not %s"
                            % (where, type(layer).__name__))
        kind = layer.get("type")
        if not isinstance(kind, str) or not _NAME.match(kind):
            raise ValueError("%s needs a 'type': a section name such as "
                             "'convolutional' (got %r)" % (where, kind))
        if i == 0 and kind not in NET_SECTIONS:
            raise ValueError("layers[0] is %r: a network begins with "
                             "{'type': 'net', ...}" % kind)
        if i > 0 and kind in NET_SECTIONS:
            raise ValueError("%s: [%s] repeated (it is layers[0])"
                             % (where, kind))
        if out:
            out.append("")
        out.append("[%s]" % kind)
        for key, value in layer.items():
            if key == "type":
                continue
            if not isinstance(key, str) or not _NAME.match(key):
                raise ValueError("%s: key %r is not a name" % (where, key))
            out.append("%s=%s" % (key, _value_text(value, "%s[%r]"
                                                   % (where, key))))
    return "\n".join(out) + "\n"


def _parse_value(text):
    if _INT.match(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def layers_from_cfg(text):
    """The sections of darknet .cfg text as a list of dicts ("type": the
    section's name; values as int, float or str): the inverse of
    cfg_from_layers. Comments (lines starting with '#' or ';', and ' ;'
    to the end of a line) and blank lines are skipped. Raises ValueError
    for a line that is neither [section] nor key=value, or a key outside a
    section; whether the network is one the cnn accelerator runs is for
    the library to say."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise TypeError("text must be a str, not %s" % type(text).__name__)
    if text.startswith("\ufeff"):
        text = text[1:]
    layers = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line[0] == "[":
            close = line.find("]")
            rest = line[close + 1:].strip() if close > 0 else "x"
            if close < 0 or (rest and rest[0] not in "#;"):
                raise ValueError("line %d: bad section header %r"
                                 % (n, line))
            layers.append({"type": line[1:close].strip()})
            continue
        key, eq, value = line.partition("=")
        if not eq or not key.strip():
            raise ValueError("line %d: expected key=value or [section], "
                             "not %r" % (n, line))
        if not layers:
            raise ValueError("line %d: key %r outside a section"
                             % (n, key.strip()))
        value = re.split(r"\s;", value, maxsplit=1)[0].strip()
        layers[-1][key.strip()] = _parse_value(value)
    return layers


def input_shape(text):
    """(channels, height, width) of the [net] section of .cfg text, or
    None when it does not give all three as positive ints."""
    try:
        layers = layers_from_cfg(text)
    except ValueError:
        return None
    for layer in layers:
        if layer["type"] in NET_SECTIONS:
            dims = [layer.get(k) for k in ("channels", "height", "width")]
            if all(isinstance(d, int) and d > 0 for d in dims):
                return tuple(dims)
            return None
    return None
