#ifndef CLOUDSYNC_CYAML_SHIM_H
#define CLOUDSYNC_CYAML_SHIM_H

#include <yaml.h>

#endif
