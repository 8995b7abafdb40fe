/*
 * test_agent.h: the Agent_OnLoad set-up every test agent here does, once.
 *
 * C99, header-only, and like the agents themselves it includes only vmti.h
 * and libc: a test agent is an agent as a user writes it, and must not see
 * the VM. Each agent states what it needs as data and calls one function:
 *
 *   static const vmtiEvent kEvents[] = {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_VM_DEATH, 0};
 *   TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC,
 *                       .callbacks = {.SampledObjectAlloc = on_sample, .VMDeath = on_death},
 *                       .set_interval = TA_SET_INTERVAL, .interval = 0, .events = kEvents};
 *   return TestAgentStart(vm, &s) ? 0 : 1;
 *
 * The steps run in the order JVMTI agents use, stopping at the first error:
 * AddCapabilities (when any is asked), SetEventCallbacks,
 * SetHeapSamplingInterval (when asked: 0 is an interval too), then
 * SetEventNotificationMode(ENABLE, event, NULL) for each event in order.
 * An agent that needs a step of its own in between (a raw monitor before
 * its callbacks can run) calls TestAgentEnv, then TestAgentSetUp.
 * Tests of the set-up functions' own errors (badargs, otherstacks) call
 * them directly.
 */
#ifndef MINIVM_TESTS_AGENTS_TEST_AGENT_H_
#define MINIVM_TESTS_AGENTS_TEST_AGENT_H_

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmti/vmti.h"

/* Capabilities, as flags (vmtiCapabilities has padding bits that must be
 * zero, so the header builds it). */
enum {
  TA_SAMPLED_ALLOC = 1u << 0,  /* can_generate_sampled_alloc_events */
  TA_TAG_OBJECTS = 1u << 1,    /* can_tag_objects */
  TA_OBJECT_FREE = 1u << 2,    /* can_generate_object_free_events */
  TA_OBJECT_PROMOTE = 1u << 3, /* can_generate_object_promote_events */
  TA_GC_EVENTS = 1u << 4,      /* can_generate_garbage_collection_events */
};

enum { TA_KEEP_INTERVAL = 0, TA_SET_INTERVAL = 1 };

typedef struct {
  unsigned capabilities;        /* TA_* flags; 0: AddCapabilities is not called */
  vmtiEventCallbacks callbacks; /* set whole; the ones left NULL get no events */
  int set_interval;             /* TA_SET_INTERVAL: SetHeapSamplingInterval(interval) */
  vmtiInt interval;
  const vmtiEvent* events; /* enabled for every thread, in order, up to a 0; may be NULL */
} TestAgentSetup;

/* caps with exactly the capabilities of `flags` (TA_*). */
static inline void TestAgentCapabilities(unsigned flags, vmtiCapabilities* caps) {
  memset(caps, 0, sizeof *caps);
  caps->can_generate_sampled_alloc_events = (flags & TA_SAMPLED_ALLOC) != 0;
  caps->can_tag_objects = (flags & TA_TAG_OBJECTS) != 0;
  caps->can_generate_object_free_events = (flags & TA_OBJECT_FREE) != 0;
  caps->can_generate_object_promote_events = (flags & TA_OBJECT_PROMOTE) != 0;
  caps->can_generate_garbage_collection_events = (flags & TA_GC_EVENTS) != 0;
}

/* The environment of VMTI_VERSION_1, or NULL. */
static inline vmtiEnv* TestAgentEnv(vmtiVM* vm) {
  vmtiEnv* env = NULL;
  if ((*vm)->GetEnv(vm, (void**)&env, VMTI_VERSION_1) != VMTI_ERROR_NONE) return NULL;
  return env;
}

/* The set-up above on env; the first error, or VMTI_ERROR_NONE. */
static inline vmtiError TestAgentSetUp(vmtiEnv* env, const TestAgentSetup* s) {
  vmtiError e = VMTI_ERROR_NONE;
  if (s->capabilities) {
    vmtiCapabilities caps;
    TestAgentCapabilities(s->capabilities, &caps);
    if ((e = (*env)->AddCapabilities(env, &caps)) != VMTI_ERROR_NONE) return e;
  }
  vmtiEventCallbacks cb = s->callbacks;
  if ((e = (*env)->SetEventCallbacks(env, &cb, (vmtiInt)sizeof cb)) != VMTI_ERROR_NONE) return e;
  if (s->set_interval == TA_SET_INTERVAL &&
      (e = (*env)->SetHeapSamplingInterval(env, s->interval)) != VMTI_ERROR_NONE)
    return e;
  for (const vmtiEvent* ev = s->events; ev && *ev; ev++)
    if ((e = (*env)->SetEventNotificationMode(env, VMTI_ENABLE, *ev, NULL)) != VMTI_ERROR_NONE)
      return e;
  return VMTI_ERROR_NONE;
}

/* TestAgentEnv, then TestAgentSetUp: the environment, or NULL on any error
 * (Agent_OnLoad then returns 1). */
static inline vmtiEnv* TestAgentStart(vmtiVM* vm, const TestAgentSetup* s) {
  vmtiEnv* env = TestAgentEnv(vm);
  return env && TestAgentSetUp(env, s) == VMTI_ERROR_NONE ? env : NULL;
}

/* The options string "a=1,b,c=x" one item at a time:
 *
 *   TestAgentOptions o = {.rest = options};
 *   for (char* t; (t = TestAgentNextOption(&o)) != NULL;)
 *     if (!strncmp(t, "interval=", 9)) g_interval = (vmtiInt)atol(t + 9);
 *
 * options may be NULL (no items); an item longer than o.item is cut; the
 * item returned lives in o. */
typedef struct {
  const char* rest;
  char item[4096];
} TestAgentOptions;

static inline char* TestAgentNextOption(TestAgentOptions* o) {
  while (o->rest && *o->rest == ',') o->rest++;
  if (!o->rest || !*o->rest) return NULL;
  const char* end = strchr(o->rest, ',');
  size_t len = end ? (size_t)(end - o->rest) : strlen(o->rest);
  size_t n = len < sizeof o->item - 1 ? len : sizeof o->item - 1;
  memcpy(o->item, o->rest, n);
  o->item[n] = '\0';
  o->rest += len;
  return o->item;
}

/* Options by table: each entry names an option and where its value goes.
 *
 *   static const TestAgentOption kOptions[] = {
 *       TA_OPTION("interval", TA_OPTION_INT, &g_interval),
 *       TA_STRING_OPTION("only", g_only), TA_OPTIONS_END};
 *   if (TestAgentParseOptions("threadfilter", options, kOptions)) return 1;
 *
 * An item "name=value" matches the entry `name`. TA_OPTION_INT stores a
 * vmtiInt, TA_OPTION_LONG a long long, TA_OPTION_FLAG stores 1 for
 * "name=1" (and 0 for "name=0"), TA_OPTION_STRING copies the value into a
 * char buffer of `size` bytes, cut to fit. `given`, when set, is set to 1
 * when the option appears. An item that names no entry, or a number that
 * does not parse, is an error: "<agent>: bad option <item>" on stderr and
 * a non-zero result, so a misspelt option in a test fails the test
 * instead of being ignored. */
typedef enum {
  TA_OPTION_INT,
  TA_OPTION_LONG,
  TA_OPTION_FLAG,
  TA_OPTION_STRING
} TestAgentOptionKind;

typedef struct {
  const char* name;
  TestAgentOptionKind kind;
  void* target;
  size_t size;
  int* given;
} TestAgentOption;

#define TA_OPTION(name, kind, target) \
  { (name), (kind), (target), 0, NULL }
#define TA_STRING_OPTION(name, buffer) \
  { (name), TA_OPTION_STRING, (buffer), sizeof(buffer), NULL }
#define TA_OPTIONS_END \
  { NULL, TA_OPTION_INT, NULL, 0, NULL }

static inline int TestAgentParseNumber(const char* s, long long* out) {
  char* end = NULL;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end) return 0;
  *out = v;
  return 1;
}

static inline int TestAgentParseOptions(const char* agent, const char* options,
                                        const TestAgentOption* table) {
  TestAgentOptions o = {.rest = options};
  for (char* t; (t = TestAgentNextOption(&o)) != NULL;) {
    char* eq = strchr(t, '=');
    const TestAgentOption* e = table;
    if (eq)
      for (; e->name; e++)
        if ((size_t)(eq - t) == strlen(e->name) && !strncmp(t, e->name, (size_t)(eq - t))) break;
    long long v = 0;
    int ok = eq && e->name;
    if (ok && e->kind == TA_OPTION_STRING)
      snprintf((char*)e->target, e->size, "%s", eq + 1);
    else if (ok)
      ok = TestAgentParseNumber(eq + 1, &v);
    if (ok && e->kind == TA_OPTION_INT) *(vmtiInt*)e->target = (vmtiInt)v;
    if (ok && e->kind == TA_OPTION_LONG) *(long long*)e->target = v;
    if (ok && e->kind == TA_OPTION_FLAG) *(int*)e->target = v != 0;
    if (!ok) {
      fprintf(stderr, "%s: bad option %s\n", agent, t);
      return 1;
    }
    if (e->given) *e->given = 1;
  }
  return 0;
}

/* Whether klass's signature is `name` (0 if it cannot be read). */
static inline int TestAgentClassIs(vmtiEnv* env, vmtiClass klass, const char* name) {
  char* sig = NULL;
  if ((*env)->GetClassSignature(env, klass, &sig, NULL) != VMTI_ERROR_NONE || !sig) return 0;
  int r = !strcmp(sig, name);
  (*env)->Deallocate(env, (unsigned char*)sig);
  return r;
}

#endif /* MINIVM_TESTS_AGENTS_TEST_AGENT_H_ */
