/* errors.c - texts for the error list in ember_errors.h. */
#include "ember/ember_errors.h"

const char *ember_strerror(int code) {
  switch (code) {
  case 0: return "success";
#define EMBER_ERRNO_TEXT_(name, value, text) case value: return text;
  EMBER_ERRNO_MAP(EMBER_ERRNO_TEXT_)
#undef EMBER_ERRNO_TEXT_
  }
  return "unknown error";
}

const char *ember_errname(int code) {
  switch (code) {
  case 0: return "OK";
#define EMBER_ERRNO_NAME_(name, value, text) case value: return #name;
  EMBER_ERRNO_MAP(EMBER_ERRNO_NAME_)
#undef EMBER_ERRNO_NAME_
  }
  return "EUNKNOWN";
}
