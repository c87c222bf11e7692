#!/usr/bin/env bash
# Checks that an installed cloudsync needs no Swift toolchain at run time: `ldd BINARY` may list only the C and C++
# runtime of the system (libc, libm, libstdc++, libgcc_s, the dynamic loader and the like), the Debian libraries
# CloudSync uses (libsqlite3, libsodium, libyaml, libcrypto for the s3 provider's MD5, libssl for the loopback
# server's TLS, libpq for state kept in PostgreSQL, libmicrohttpd for serve's listener, libjq and its
# regular expression library libonig for cloudsync-jq), the two that FoundationNetworking and FoundationXML load (libcurl
# for HTTP, libxml2 for S3's XML), and what libpq, libcurl, libxml2 and libmicrohttpd need themselves (as `ldd` of each lists it:
# TLS, Kerberos, LDAP, HTTP/2, compression, ICU). Anything else --
# libswiftCore, libFoundation, libdispatch, a library ldd cannot find -- fails, naming it. docs/install.md,
# lists the same packages; change both together.
# Usage: scripts/check-libraries.sh BINARY
set -euo pipefail
binary=${1:?usage: check-libraries.sh BINARY}

if ! output=$(ldd "$binary" 2>&1); then
    echo "check-libraries: error: ldd $binary failed:" >&2
    echo "$output" >&2
    exit 1
fi

allowed_system='^(linux-vdso\.so\.1|linux-gate\.so\.1|ld-linux(-x86-64|-aarch64)?\.so\.[0-9]+|libc\.so\.6|libm\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libutil\.so\.1)$'
allowed_debian='^(libsqlite3\.so\.0|libsodium\.so\.[0-9]+|libyaml-0\.so\.[0-9]+|libcrypto\.so\.[0-9]+|libssl\.so\.[0-9]+|libpq\.so\.5|libcurl\.so\.4|libxml2\.so\.2|libmicrohttpd\.so\.12|libzstd\.so\.1|libz\.so\.1|libjq\.so\.1|libonig\.so\.5)$'

# What libpq, libcurl, libxml2 and libmicrohttpd need themselves is theirs to choose (Debian builds libcurl with GnuTLS for LDAP,
# libmicrohttpd with GnuTLS for serve's HTTPS,
# libpq with GSSAPI and LDAP, and so on); take it from ldd of the copies the binary resolved, not from a list here.
transitive=" "
while IFS= read -r line; do
    case $line in
        *"libcurl.so"*" => /"* | *"libxml2.so"*" => /"* | *"libpq.so"*" => /"* | *"libmicrohttpd.so"*" => /"*)
            library=${line#* => }
            library=${library%% (*}
            for name in $(ldd "$library" 2>/dev/null | awk '{print $1}'); do transitive+="${name##*/} "; done
            ;;
    esac
done <<<"$output"


problems=()
found=()
while IFS= read -r line; do
    line=${line#"${line%%[![:space:]]*}"}
    [ -n "$line" ] || continue
    name=${line%% *}
    path=""
    case $line in
        *" => not found"*) problems+=("$name: not found on this system"); continue ;;
        *" => "*) path=${line#* => }; path=${path%% (*} ;;
        /*) path=$name ;;
    esac
    name=${name##*/}
    found+=("$name")
    if [[ $name =~ ^lib(swift|_?Foundation|dispatch|BlocksRuntime|_FoundationICU) ]]; then
        problems+=("$name${path:+ ($path)}: part of the Swift runtime, which must be linked statically (swift build --static-swift-stdlib)")
    elif [[ $name =~ $allowed_system ]]; then
        :
    elif [[ $name =~ $allowed_debian || $transitive == *" $name "* ]]; then
        case $path in
            /lib/* | /usr/lib/*) ;;
            *) problems+=("$name: resolved to $path, not the Debian package's copy under /lib or /usr/lib") ;;
        esac
    else
        problems+=("$name${path:+ ($path)}: not one of the libraries an installed cloudsync may need")
    fi
done <<<"$output"

if [ ${#found[@]} -eq 0 ]; then
    echo "check-libraries: error: ldd listed no library for $binary:" >&2
    echo "$output" >&2
    exit 1
fi
if [ ${#problems[@]} -gt 0 ]; then
    echo "check-libraries: error: $binary needs unexpected libraries:" >&2
    printf '  %s\n' "${problems[@]}" >&2
    echo "ldd said:" >&2
    echo "$output" >&2
    exit 1
fi
echo "check-libraries: $binary needs only ${found[*]}" >&2
