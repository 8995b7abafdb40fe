/*
 * heapwalk_bench: what heap walks cost, for benchmarks/heap_walk_cost.py.
 * At VMDeath (the program's objects still reachable from its globals) it
 * times, on the dying thread:
 *   follow   FollowReferences from the roots, following everything, no tags;
 *   iterate  IterateThroughHeap over every live object;
 *   search   what leakcheck's path search does per object: FollowReferences
 *            tagging every object it reaches with a node number (up to
 *            budget=N objects, default all), then a second walk clearing
 *            the tags.
 * and prints one line each: `heapwalk_bench: NAME objects=N refs=R ms=T`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmti/vmti.h"

static long long g_budget = -1;
static long long g_objects, g_refs;

static vmtiInt follow_all(vmtiHeapReferenceKind kind, const vmtiHeapReferenceInfo* info,
                          vmtiClass klass, vmtiClass referrer_klass, vmtiLong size,
                          vmtiLong* tag_ptr, vmtiLong* referrer_tag_ptr, vmtiInt length,
                          void* user_data) {
  (void)kind, (void)info, (void)klass, (void)referrer_klass, (void)size, (void)tag_ptr;
  (void)referrer_tag_ptr, (void)length, (void)user_data;
  g_refs++;
  return VMTI_VISIT_OBJECTS;
}

static vmtiInt count_object(vmtiClass klass, vmtiLong size, vmtiLong* tag_ptr, vmtiInt length,
                            void* user_data) {
  (void)klass, (void)size, (void)tag_ptr, (void)length, (void)user_data;
  g_objects++;
  return 0;
}

static vmtiInt tag_new(vmtiHeapReferenceKind kind, const vmtiHeapReferenceInfo* info,
                       vmtiClass klass, vmtiClass referrer_klass, vmtiLong size, vmtiLong* tag_ptr,
                       vmtiLong* referrer_tag_ptr, vmtiInt length, void* user_data) {
  (void)kind, (void)info, (void)klass, (void)referrer_klass, (void)size;
  (void)referrer_tag_ptr, (void)length, (void)user_data;
  g_refs++;
  if (*tag_ptr != 0) return 0;
  if (g_budget >= 0 && g_objects >= g_budget) return VMTI_VISIT_ABORT;
  *tag_ptr = ++g_objects;
  return VMTI_VISIT_OBJECTS;
}

static vmtiInt untag(vmtiHeapReferenceKind kind, const vmtiHeapReferenceInfo* info,
                     vmtiClass klass, vmtiClass referrer_klass, vmtiLong size, vmtiLong* tag_ptr,
                     vmtiLong* referrer_tag_ptr, vmtiInt length, void* user_data) {
  (void)kind, (void)info, (void)klass, (void)referrer_klass, (void)size;
  (void)referrer_tag_ptr, (void)length, (void)user_data;
  if (*tag_ptr == 0) return 0;
  *tag_ptr = 0;
  return VMTI_VISIT_OBJECTS;
}

static double now_ms(vmtiEnv* env) {
  vmtiLong t = 0;
  (*env)->GetTime(env, &t);
  return (double)t / 1e6;
}

static void report(const char* name, double ms) {
  printf("heapwalk_bench: %s objects=%lld refs=%lld ms=%.1f\n", name, g_objects, g_refs, ms);
  fflush(stdout);
}

static void on_death(vmtiEnv* env) {
  vmtiHeapCallbacks cbs;
  memset(&cbs, 0, sizeof cbs);
  cbs.heap_reference_callback = &follow_all;
  cbs.heap_iteration_callback = &count_object;
  g_objects = g_refs = 0;
  double t = now_ms(env);
  vmtiError err = (*env)->FollowReferences(env, 0, NULL, NULL, &cbs, NULL);
  report("follow", now_ms(env) - t);
  g_objects = g_refs = 0;
  t = now_ms(env);
  err |= (*env)->IterateThroughHeap(env, 0, NULL, &cbs, NULL);
  report("iterate", now_ms(env) - t);
  g_objects = g_refs = 0;
  cbs.heap_reference_callback = &tag_new;
  t = now_ms(env);
  err |= (*env)->FollowReferences(env, 0, NULL, NULL, &cbs, NULL);
  const double tag_ms = now_ms(env) - t;
  cbs.heap_reference_callback = &untag;
  t = now_ms(env);
  err |= (*env)->FollowReferences(env, 0, NULL, NULL, &cbs, NULL);
  report("search", tag_ms);
  report("untag", now_ms(env) - t);
  if (err != VMTI_ERROR_NONE) printf("heapwalk_bench: a walk failed\n");
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  vmtiEnv* env = NULL;
  if (options != NULL && strncmp(options, "budget=", 7) == 0) g_budget = atoll(options + 7);
  if ((*vm)->GetEnv(vm, (void**)&env, VMTI_VERSION_1) != VMTI_ERROR_NONE) return 1;
  vmtiCapabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.can_tag_objects = 1;
  if ((*env)->AddCapabilities(env, &caps) != VMTI_ERROR_NONE) return 1;
  vmtiEventCallbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.VMDeath = &on_death;
  if ((*env)->SetEventCallbacks(env, &cb, (vmtiInt)sizeof cb) != VMTI_ERROR_NONE) return 1;
  return (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_VM_DEATH, NULL) ==
                 VMTI_ERROR_NONE
             ? 0
             : 1;
}
