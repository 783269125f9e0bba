# One static library per src/ module. A module links only the modules it names in DEPS,
# so an include that points the wrong way fails to build (DESIGN.md: the build enforces
# the layers). Sources are globbed, sub-folders included (kernels/ has one per family),
# so adding a file needs no CMake edit.
function(pagoda_module name)
  cmake_parse_arguments(PM "" "" "DEPS;LIBS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cpp)
  set(deps "")
  foreach(d ${PM_DEPS})
    list(APPEND deps pagoda_${d})
  endforeach()
  if(NOT srcs)
    # A header-only module.
    add_library(pagoda_${name} INTERFACE)
    target_include_directories(pagoda_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(pagoda_${name} INTERFACE ${deps} ${PM_LIBS})
    return()
  endif()
  # SIMD bodies are compiled once per target and chosen at run time (base/cpu_features.h):
  # a file named *_avx2.cpp gets AVX2+FMA+F16C, *_avx512.cpp the AVX-512 set of Zen 4 /
  # Ice Lake (F, BW, VL, DQ, VNNI, BF16), *_avx512bw.cpp that of Skylake-X (F, BW, VL,
  # DQ: no VNNI), *_amx.cpp the AVX-512 set and AMX-INT8. Nothing else is built for a
  # specific CPU.
  foreach(src ${srcs})
    if(src MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2")
    elseif(src MATCHES "_avx512bw\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mbmi2;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq")
    elseif(src MATCHES "_avx512vbmi\\.cpp$")
      # The AVX-512 set plus VBMI and VBMI2 (Ice Lake, Zen 4): byte permutes, compress and
      # expand; callers check cpu_features() before running anything in such a file.
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mbmi2;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-mavx512vbmi;-mavx512vbmi2")
    elseif(src MATCHES "_amx\\.cpp$")
      # The AVX-512 set plus AMX tiles with int8 dot products (Sapphire Rapids); callers
      # check cpu_features().amx_int8 (which includes the kernel's permission) first.
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mbmi2;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-mamx-tile;-mamx-int8")
    elseif(src MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mbmi2;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16")
    endif()
  endforeach()
  add_library(pagoda_${name} STATIC ${srcs})
  target_include_directories(pagoda_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(pagoda_${name} PUBLIC ${deps} ${PM_LIBS})
endfunction()

# One GoogleTest binary per tests/<module>/ folder.
function(pagoda_test_module name)
  cmake_parse_arguments(PT "" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*_test.cpp)
  if(NOT srcs)
    return()
  endif()
  add_executable(test_${name} ${srcs})
  set(deps "")
  foreach(d ${PT_DEPS})
    list(APPEND deps pagoda_${d})
  endforeach()
  target_include_directories(test_${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(test_${name} PRIVATE ${deps} GTest::gtest_main)
  gtest_discover_tests(test_${name} PROPERTIES ENVIRONMENT "PAGODA_SOURCE_DIR=${PROJECT_SOURCE_DIR}" DISCOVERY_TIMEOUT 60)
endfunction()
