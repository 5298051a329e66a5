"""ember's error codes (common/include/ember/ember_errors.h) and ember.Error.

The codes are the negative EMBER_E* values of the C library; they are never
renumbered, so they are written out here (a test checks them against the
header and against the library's ember_errname).
"""

from . import _lib

# (name without the EMBER_ prefix, value), in the header's order
CODES = (
    ("EINVAL", -1), ("ENOMEM", -2), ("EPROTO", -3), ("ETOOBIG", -4),
    ("EVERSION", -5), ("ENOACCEL", -6), ("ENOPLATFORM", -7),
    ("ENOTFOUND", -8), ("ECONNECT", -9), ("ECONNLOST", -10),
    ("ETIMEDOUT", -11), ("ECANCELED", -12), ("EBUSY", -13), ("EIO", -14),
    ("EPARAM", -15), ("EBLOCK", -16), ("ECONFIG", -17), ("ESHUTDOWN", -18),
    ("EFORMAT", -19), ("EINTERNAL", -20), ("EPLATFORM", -21),
    ("ELEASE", -22), ("EDENIED", -23), ("ESTATE", -24),
)

EMBER_OK = 0
for _name, _value in CODES:
    globals()["EMBER_" + _name] = _value
_NAMES = {value: "EMBER_" + name for name, value in CODES}

__all__ = ["Error", "EMBER_OK", "CODES", "check"] + \
    ["EMBER_" + name for name, _ in CODES]


class Error(Exception):
    """A failed ember call.

    code:   the negative EMBER_E* value (compare with ember.EMBER_EPARAM...)
    name:   its symbolic name, "EMBER_EPARAM"
    detail: the library's detail text (ember_last_error(), or a task's
            ember_task_message()), "" if none
    str(e): "EMBER_EPARAM: invalid parameters: <detail>"
    """

    def __init__(self, code, detail=""):
        self.code = code
        self.name = _NAMES.get(code, "EMBER_E%d" % -code)
        self.strerror = _lib.text(_lib.lib.ember_strerror(code))
        self.detail = detail
        msg = "%s: %s" % (self.name, self.strerror)
        if detail:
            msg += ": " + detail
        super().__init__(msg)


def check(rc, what=None):
    """Raise Error for a negative rc, with the calling thread's
    ember_last_error() (read right away: the next ember call replaces it)."""
    if rc < 0:
        detail = _lib.text(_lib.lib.ember_last_error())
        if what and not detail:
            detail = what
        raise Error(rc, detail)
    return rc
