#!/usr/bin/env bash
# Prints cloudsync(1): the man page is the built binary's `--help` text, as it is, so the two never disagree.
# Usage: scripts/make-manpage.sh BINARY DOCDIR   (DOCDIR: where `make install` puts README.md, named in SEE ALSO)
set -euo pipefail
binary=$1
docdir=$2
version=$("$binary" --version)
help=$("$binary" --help)
# roff: a backslash is written \e; a line starting with . or ' would be a request, so \& goes before it.
body=$(printf '%s\n' "$help" | sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/")
cat <<MAN
.TH CLOUDSYNC 1 "" "${version}" "User Commands"
.SH NAME
cloudsync \- run CloudSync pipeline files: sync, migration, quota audits and encrypted backups
.SH SYNOPSIS
.B cloudsync
.I subcommand
[options]
.SH DESCRIPTION
The text of
.BR "cloudsync \-\-help" :
.PP
.nf
${body}
.fi
.SH FILES
.TP
.I /etc/cloudsync/NAME.yaml
the pipeline the systemd units cloudsync@NAME.service and cloudsync@NAME.timer run
.SH SEE ALSO
.nf
${docdir}/README.md
${docdir}/schemas/    the JSON Schemas of pipeline files and run reports
${docdir}/systemd/    units that run a pipeline on a timer
.fi
MAN
