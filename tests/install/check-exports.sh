#!/usr/bin/env bash
# tests/install/check-exports.sh LIBRARY... — the symbols a shared library exports are its public
# API and nothing else (include/aperture/export.h: APERTURE_API).
#
# Every defined dynamic symbol must name something in namespace aperture (a function, a member,
# a class's vtable or typeinfo), and nothing in aperture::detail except what the public inline
# headers call into the library for (listed below). Anything else (a std:: template instance, a
# private class of src/, a helper without a namespace) is printed, and the check fails.
set -euo pipefail

# What the public inline headers need from the library, by demangled name (up to the first '(').
required_detail=(
  'aperture::detail::check_translation_against_map'  # checked_translate (address_map.h)
  'aperture::detail::job_watch'                      # the job watch of every host wait (host_wait.h)
  'aperture::detail::bulk_bytes'                     # the element forms' byte count (bulk.h)
)
# What the linker defines in every shared object.
linker_symbols=(_init _fini _edata _end __bss_start)

(($# > 0)) || { echo "usage: $0 LIBRARY..." >&2; exit 2; }
status=0
for lib in "$@"; do
  [[ -f $lib ]] || { echo "check-exports: $lib: no such file" >&2; status=1; continue; }
  mapfile -t symbols < <(nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u)
  ((${#symbols[@]} > 0)) || { echo "check-exports: $lib exports nothing" >&2; status=1; continue; }
  leaks=()
  public=0
  for mangled in "${symbols[@]}"; do
    name=$(c++filt -- "$mangled")
    for s in "${linker_symbols[@]}"; do [[ $mangled == "$s" ]] && continue 2; done
    # The entity the symbol belongs to: vtables, typeinfo and thunks name a class or function.
    entity=$name
    for prefix in 'vtable for ' 'typeinfo for ' 'typeinfo name for ' 'VTT for ' 'construction vtable for ' \
                  'non-virtual thunk to ' 'virtual thunk to ' 'guard variable for ' 'TLS init function for ' \
                  'TLS wrapper function for '; do
      entity=${entity#"$prefix"}
    done
    entity=${entity%%(*}
    entity=${entity//\[abi:cxx11\]/}  # an ABI tag is no part of the name
    if [[ $entity == aperture::detail::* ]]; then
      for allowed in "${required_detail[@]}"; do [[ $entity == "$allowed" ]] && { public=$((public + 1)); continue 2; }; done
      leaks+=("$name")
    elif [[ $entity == aperture::* && $entity != *'(anonymous namespace)'* ]]; then
      public=$((public + 1))
    else
      leaks+=("$name")
    fi
  done
  if ((${#leaks[@]} > 0)); then
    echo "check-exports: $lib exports ${#leaks[@]} symbols outside aperture's public API:"
    printf '  %s\n' "${leaks[@]}"
    status=1
  else
    echo "check-exports: $lib exports $public symbols, all of aperture's public API"
  fi
done
exit "$status"
