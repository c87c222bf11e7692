#ifndef CLOUDSYNC_BUILD_INFO_H
#define CLOUDSYNC_BUILD_INFO_H

// What the binary was built from, as the build passed it (Package.swift, from the variables `make release` sets);
// each is "" when the build did not say.

/// The git commit, with "-dirty" when tracked files differed from it.
const char *cloudsync_build_commit(void);
/// The commit's date, ISO 8601 in UTC.
const char *cloudsync_build_commit_date(void);
/// The Swift compiler's version, as `swift --version` printed it: "6.3.1".
const char *cloudsync_build_swift_version(void);

#endif
