/* test_sw_dispatch.c - EMBER_SW_ISA picks the kernel variant, once per
 * process; an unknown or unsupported name falls back to the widest. Each
 * case runs in a child process because the choice is made only once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ember/ember_errors.h"
#include "sw/sw.h"

static acc_sw_isa widest(void) {
  acc_sw_isa best = ACC_SW_ISA_SCALAR;
  for (int i = 0; i < ACC_SW_ISA_COUNT; i++)
    if (acc_sw_isa_supported((acc_sw_isa)i)) best = (acc_sw_isa)i;
  return best;
}

/* selected_with: the variant a fresh process selects under EMBER_SW_ISA */
static int selected_with(const char *value) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (value)
      setenv("EMBER_SW_ISA", value, 1);
    else
      unsetenv("EMBER_SW_ISA");
    _exit((int)acc_sw_isa_selected());
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static void test_override(void **state) {
  (void)state;
  assert_int_equal(selected_with(NULL), widest());
  for (int i = 0; i < ACC_SW_ISA_COUNT; i++) {
    int got = selected_with(acc_sw_isa_name((acc_sw_isa)i));
    if (acc_sw_isa_supported((acc_sw_isa)i))
      assert_int_equal(got, i);
    else
      assert_int_equal(got, widest());
  }
  assert_int_equal(selected_with("avx1024"), widest());
  assert_int_equal(selected_with(""), widest());
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_override),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
