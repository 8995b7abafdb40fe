/*
 * heldobjects: an agent thread reading objects that GetObjectsWithTags
 * returned, while language threads allocate and collections move those
 * objects. An agent thread is not a mutator, so no safepoint waits for it:
 * the functions that read an object through a handle stop the world for
 * the call on such a thread (agent_api/thread_states.h, ObjectAccessScope).
 *
 * At interval 0 every allocation is sampled and tagged with its own size
 * (SetTag(object, size)), so the tag says what GetObjectSize must answer.
 * The "inspector" agent thread loops: GetObjectsWithTags for the sizes
 * 16..256, then one read of one of the returned objects (the handles of an
 * agent thread live until the call after GetObjectsWithTags returns),
 * rotating between GetObjectSize, GetTag and GetObjectGeneration; every 16th
 * round it forces a collection itself. A read that raced with a collection
 * would see a moved object's stale copy: a wrong size or tag.
 * VMDeath stops the inspector through a raw monitor and waits until it has
 * left, then prints `PASS heldobjects` (with at least one read checked) or
 * FAIL lines.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "test_agent.h"

#define MAX_FAILURES 8

static vmtiEnv* g_env;
static vmtiRawMonitorID g_monitor;
static int g_stop;          /* under g_monitor */
static int g_done;          /* under g_monitor */
static long long g_reads;   /* the inspector's own */
static long long g_rounds;  /* the inspector's own */
static int g_failures;      /* the inspector's own until g_done */

static void fail(const char* what, long long got, long long want) {
  if (++g_failures <= MAX_FAILURES) {
    printf("FAIL heldobjects: %s: got %lld, want %lld\n", what, got, want);
  }
}


static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                      vmtiLong size) {
  (void)thread;
  (void)klass;
  (*env)->SetTag(env, object, size);
}

static int stop_requested(void) {
  int stop;
  (*g_env)->RawMonitorEnter(g_env, g_monitor);
  stop = g_stop;
  (*g_env)->RawMonitorExit(g_env, g_monitor);
  return stop;
}

static void inspector(vmtiEnv* env, void* arg) {
  (void)arg;
  vmtiLong wanted[31];
  for (int i = 0; i < 31; ++i) wanted[i] = 16 + 8 * i;
  while (!stop_requested()) {
    vmtiInt n = 0;
    vmtiObject* objects = NULL;
    vmtiLong* tags = NULL;
    vmtiError err = (*env)->GetObjectsWithTags(env, 31, wanted, &n, &objects, &tags);
    if (err == VMTI_ERROR_WRONG_PHASE) break; /* the VM is ending */
    if (err != VMTI_ERROR_NONE) {
      fail("GetObjectsWithTags", err, VMTI_ERROR_NONE);
      break;
    }
    ++g_rounds;
    if (n > 0) {
      const vmtiInt k = (vmtiInt)((g_rounds * 7919) % n);
      switch (g_rounds % 3) {
        case 0: {
          vmtiLong size = 0;
          err = (*env)->GetObjectSize(env, objects[k], &size);
          if (err == VMTI_ERROR_NONE && size != tags[k]) fail("GetObjectSize", size, tags[k]);
          break;
        }
        case 1: {
          vmtiLong tag = 0;
          err = (*env)->GetTag(env, objects[k], &tag);
          if (err == VMTI_ERROR_NONE && tag != tags[k]) fail("GetTag", tag, tags[k]);
          break;
        }
        default: {
          vmtiGeneration generation;
          err = (*env)->GetObjectGeneration(env, objects[k], &generation);
          if (err == VMTI_ERROR_NONE && generation != VMTI_GENERATION_YOUNG &&
              generation != VMTI_GENERATION_OLD) {
            fail("GetObjectGeneration", generation, VMTI_GENERATION_OLD);
          }
          break;
        }
      }
      if (err == VMTI_ERROR_WRONG_PHASE) {
        (*env)->Deallocate(env, (unsigned char*)objects);
        (*env)->Deallocate(env, (unsigned char*)tags);
        break;
      }
      if (err != VMTI_ERROR_NONE) fail("reading a held object", err, VMTI_ERROR_NONE);
      ++g_reads;
    }
    (*env)->Deallocate(env, (unsigned char*)objects);
    (*env)->Deallocate(env, (unsigned char*)tags);
    if (g_rounds % 16 == 0) {
      err = (*env)->ForceGarbageCollection(env);
      if (err == VMTI_ERROR_WRONG_PHASE) break;
      if (err != VMTI_ERROR_NONE) fail("ForceGarbageCollection", err, VMTI_ERROR_NONE);
    }
  }
  (*env)->RawMonitorEnter(env, g_monitor);
  g_done = 1;
  (*env)->RawMonitorNotifyAll(env, g_monitor);
  (*env)->RawMonitorExit(env, g_monitor);
}

static void on_vm_init(vmtiEnv* env, vmtiThread thread) {
  (void)thread;
  vmtiError err = (*env)->RunAgentThread(env, "inspector", &inspector, NULL, NULL);
  if (err != VMTI_ERROR_NONE) fail("RunAgentThread", err, VMTI_ERROR_NONE);
}

static void on_vm_death(vmtiEnv* env) {
  (*env)->RawMonitorEnter(env, g_monitor);
  g_stop = 1;
  while (!g_done) (*env)->RawMonitorWait(env, g_monitor, 0);
  (*env)->RawMonitorExit(env, g_monitor);
  if (g_reads == 0) fail("reads of held objects", 0, 1);
  if (g_failures == 0) printf("PASS heldobjects\n");
  fflush(stdout);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)options;
  (void)reserved;
  g_env = TestAgentEnv(vm);
  if (!g_env || (*g_env)->CreateRawMonitor(g_env, "heldobjects", &g_monitor) != VMTI_ERROR_NONE) return 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_INIT, VMTI_EVENT_VM_DEATH,
                                      VMTI_EVENT_SAMPLED_OBJECT_ALLOC, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC | TA_TAG_OBJECTS,
                      .callbacks = {.SampledObjectAlloc = &on_sample, .VMInit = &on_vm_init,
                                    .VMDeath = &on_vm_death},
                      .set_interval = TA_SET_INTERVAL, .interval = 0, .events = kEvents};
  return TestAgentSetUp(g_env, &s) == VMTI_ERROR_NONE ? 0 : 1;
}
