# The provider list machinery. src/providers/CMakeLists.txt holds the one list of providers, one
# pmr_add_provider(<name>) per folder; each folder's CMakeLists.txt describes its provider with
# pmr_provider(). Everything else (the enumerators of pmr::Provider, PMR_WITH_<NAME>, the variant
# of compiled provider types, the configure summary, the package's dependencies) is derived from
# them by pmr_generate_provider_files().

# Default of providers that need Linux (memory files, cross-memory attach): ON there, else OFF.
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  set(PMR_ON_LINUX ON)
else()
  set(PMR_ON_LINUX OFF)
endif()

# pmr_add_provider(<name>): adds the provider in src/providers/<name>/. The order of the calls is the
# order (and numbering) of the enumerators of pmr::Provider: append new providers at the end.
function(pmr_add_provider name)
  set_property(GLOBAL APPEND PROPERTY PMR_KNOWN_PROVIDERS ${name})
  add_subdirectory(${name})
endfunction()

# pmr_provider(<name> CLASS <type> HEADER <file> [ALWAYS | DEFAULT <bool>] [REQUIRES <variable>]
#              [MISSING <advice>] [DESCRIPTION <text>] [SOURCES <files...>]
#              [LIBRARIES <targets...>] [DEPENDENCY <find_dependency arguments...>]
#              [DEPENDENCY_TARGET <target>])
# Called from src/providers/<name>/CMakeLists.txt. ALWAYS providers have no option; the others get
# PMR_WITH_<NAME> (default DEFAULT). REQUIRES names a variable that must be true when the provider is
# on (e.g. ucx_FOUND), MISSING says what to install otherwise. DEPENDENCY is what the installed
# package must find_dependency() for a static libpmr, unless DEPENDENCY_TARGET exists already (some
# packages' config files cannot be loaded twice).
function(pmr_provider name)
  cmake_parse_arguments(P "ALWAYS" "CLASS;HEADER;DEFAULT;REQUIRES;MISSING;DESCRIPTION;DEPENDENCY_TARGET"
                        "SOURCES;LIBRARIES;DEPENDENCY" ${ARGN})
  string(TOUPPER ${name} upper)
  if(P_ALWAYS)
    set(enabled ON)
  else()
    option(PMR_WITH_${upper} "${name} provider: ${P_DESCRIPTION}" ${P_DEFAULT})
    set(enabled ${PMR_WITH_${upper}})
  endif()
  if(enabled AND P_REQUIRES AND NOT ${P_REQUIRES})
    message(FATAL_ERROR "PMR_WITH_${upper}=ON but the ${name} provider's dependency was not found: "
                        "${P_MISSING} (or set -DPMR_WITH_${upper}=OFF)")
  endif()
  if(NOT enabled)
    return()
  endif()
  target_sources(pmr PRIVATE ${P_SOURCES})
  if(P_LIBRARIES)
    target_link_libraries(pmr PRIVATE ${P_LIBRARIES})
  endif()
  set_property(GLOBAL APPEND PROPERTY PMR_COMPILED_PROVIDERS ${name})
  set_property(GLOBAL PROPERTY PMR_PROVIDER_CLASS_${name} ${P_CLASS})
  set_property(GLOBAL PROPERTY PMR_PROVIDER_HEADER_${name} "providers/${name}/${P_HEADER}")
  if(P_DEPENDENCY)
    string(REPLACE ";" " " _pmr_dependency "${P_DEPENDENCY}")
    set(_pmr_find "find_dependency(${_pmr_dependency})")
    if(P_DEPENDENCY_TARGET)
      set(_pmr_find "if(NOT TARGET ${P_DEPENDENCY_TARGET})\n  ${_pmr_find}\nendif()")
    endif()
    set_property(GLOBAL APPEND PROPERTY PMR_PROVIDER_DEPENDENCIES "${_pmr_find}")
  endif()
endfunction()

# Writes <build>/include/pmr/config.hpp and <build>/src/providers/compiled.hpp, and sets
# PMR_PROVIDERS (compiled, in list order) and PMR_PROVIDER_DEPENDENCIES in the caller's scope.
function(pmr_generate_provider_files)
  get_property(known GLOBAL PROPERTY PMR_KNOWN_PROVIDERS)
  get_property(compiled GLOBAL PROPERTY PMR_COMPILED_PROVIDERS)
  get_property(dependencies GLOBAL PROPERTY PMR_PROVIDER_DEPENDENCIES)
  set(PMR_PROVIDER_SWITCHES "")
  set(PMR_PROVIDER_LIST "")
  foreach(name IN LISTS known)
    string(TOUPPER ${name} upper)
    if(name IN_LIST compiled)
      set(value 1)
    else()
      set(value 0)
    endif()
    string(APPEND PMR_PROVIDER_SWITCHES "#define PMR_WITH_${upper} ${value}\n")
    string(APPEND PMR_PROVIDER_LIST " X(${name})")
  endforeach()
  configure_file(${PROJECT_SOURCE_DIR}/include/pmr/config.hpp.in
                 ${PROJECT_BINARY_DIR}/include/pmr/config.hpp @ONLY)

  set(PMR_COMPILED_INCLUDES "")
  set(PMR_COMPILED_CLASSES "")
  foreach(name IN LISTS compiled)
    get_property(header GLOBAL PROPERTY PMR_PROVIDER_HEADER_${name})
    get_property(class GLOBAL PROPERTY PMR_PROVIDER_CLASS_${name})
    string(APPEND PMR_COMPILED_INCLUDES "#include \"${header}\"\n")
    if(PMR_COMPILED_CLASSES)
      string(APPEND PMR_COMPILED_CLASSES ", ")
    endif()
    string(APPEND PMR_COMPILED_CLASSES "${class}")
  endforeach()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/compiled.hpp.in
                 ${PROJECT_BINARY_DIR}/src/providers/compiled.hpp @ONLY)
  set(PMR_PROVIDERS ${compiled} PARENT_SCOPE)
  string(REPLACE ";" "\n" dependencies "${dependencies}")
  set(PMR_PROVIDER_DEPENDENCIES "${dependencies}" PARENT_SCOPE)
endfunction()
