/*
 * noonload: a library without Agent_OnLoad (it exports a differently named
 * symbol). Loading it must fail with a one-line message naming the library
 * and exit code 1, before the program runs; never a crash.
 */
#include "vmti/vmti.h"

VMTI_EXPORT vmtiInt Agent_OnLoad_misspelled(vmtiVM* vm, char* options, void* reserved);

VMTI_EXPORT vmtiInt Agent_OnLoad_misspelled(vmtiVM* vm, char* options, void* reserved) {
  (void)vm;
  (void)options;
  (void)reserved;
  return 0;
}
