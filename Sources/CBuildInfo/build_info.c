#include "cloudsync_build_info.h"

// Package.swift always defines these (as "" when not known); the fallbacks keep the file compiling on its own.
#ifndef CLOUDSYNC_COMMIT
#define CLOUDSYNC_COMMIT ""
#endif
#ifndef CLOUDSYNC_COMMIT_DATE
#define CLOUDSYNC_COMMIT_DATE ""
#endif
#ifndef CLOUDSYNC_SWIFT_VERSION
#define CLOUDSYNC_SWIFT_VERSION ""
#endif

const char *cloudsync_build_commit(void) { return CLOUDSYNC_COMMIT; }

const char *cloudsync_build_commit_date(void) { return CLOUDSYNC_COMMIT_DATE; }

const char *cloudsync_build_swift_version(void) { return CLOUDSYNC_SWIFT_VERSION; }
