# Every third-party dependency, found from Debian packages (see shared BUILD-NOTES: the traps).
find_package(Threads REQUIRED)
find_package(Boost 1.74 CONFIG REQUIRED COMPONENTS graph)
find_package(Eigen3 3.4 CONFIG REQUIRED)
find_package(yaml-cpp 0.7 CONFIG REQUIRED)
if(NOT TARGET yaml-cpp::yaml-cpp)
  add_library(yaml-cpp::yaml-cpp INTERFACE IMPORTED)
  target_link_libraries(yaml-cpp::yaml-cpp INTERFACE yaml-cpp)
endif()
find_package(nlohmann_json 3.11 CONFIG REQUIRED)
find_package(fmt 9 CONFIG REQUIRED)
find_package(spdlog 1.10 CONFIG REQUIRED)
find_package(CLI11 2.1 CONFIG REQUIRED)

# METIS ships no CMake or pkg-config files.
find_path(METIS_INCLUDE_DIR metis.h REQUIRED)
find_library(METIS_LIBRARY metis REQUIRED)
add_library(placelab_metis INTERFACE IMPORTED)
target_include_directories(placelab_metis INTERFACE ${METIS_INCLUDE_DIR})
target_link_libraries(placelab_metis INTERFACE ${METIS_LIBRARY})

# Scotch: never libscotchmetis* (it exports METIS_* and would replace libmetis).
find_path(SCOTCH_INCLUDE_DIR scotch.h PATH_SUFFIXES scotch REQUIRED)
find_library(SCOTCH_LIBRARY scotch REQUIRED)
find_library(SCOTCHERR_LIBRARY scotcherr REQUIRED)
add_library(placelab_scotch INTERFACE IMPORTED)
target_include_directories(placelab_scotch INTERFACE ${SCOTCH_INCLUDE_DIR})
target_link_libraries(placelab_scotch INTERFACE ${SCOTCH_LIBRARY} ${SCOTCHERR_LIBRARY} Threads::Threads)

# COIN-OR CBC with CLP (coinor-libcbc-dev): the exact placement-and-schedule model and m-SCT's LP.
# Its pkg-config file is the only description Debian ships.
find_package(PkgConfig REQUIRED)
pkg_check_modules(CBC REQUIRED IMPORTED_TARGET cbc)
add_library(placelab_cbc INTERFACE IMPORTED)
target_link_libraries(placelab_cbc INTERFACE PkgConfig::CBC)

find_package(Protobuf REQUIRED)
find_package(ONNX CONFIG REQUIRED)

if(PLACELAB_BUILD_TESTS)
  find_package(GTest 1.12 CONFIG REQUIRED)
endif()
if(PLACELAB_BUILD_BENCH)
  find_package(benchmark 1.7 CONFIG REQUIRED)
endif()

# CUDA: built only when the toolkit is found (AUTO) or required (ON).
set(PLACELAB_HAVE_CUDA OFF)
if(NOT PLACELAB_WITH_CUDA STREQUAL "OFF")
  if(NOT DEFINED ENV{CUDACXX} AND NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(CMAKE_VERSION VERSION_LESS 3.25.2)
      # CMake 3.25.1 lacks nvcc's C++20 flag; without this every .cu target fails to generate.
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 75 80 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(PLACELAB_HAVE_CUDA ON)
  elseif(PLACELAB_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PLACELAB_WITH_CUDA=ON but no CUDA compiler was found (set CUDACXX)")
  endif()
endif()
message(STATUS "placelab: CUDA support ${PLACELAB_HAVE_CUDA}")

# The Python module (python/): built when pybind11 is found (AUTO) or required (ON). Against
# Debian's /usr/bin/python3, which has numpy; a pyenv `python3` first on PATH has neither.
set(PLACELAB_HAVE_PYTHON OFF)
if(NOT PLACELAB_PYTHON STREQUAL "OFF")
  if(NOT Python_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python the module is built for")
  endif()
  set(PYBIND11_FINDPYTHON ON)
  find_package(pybind11 2.10 CONFIG QUIET)
  if(pybind11_FOUND)
    set(PLACELAB_HAVE_PYTHON ON)
  elseif(PLACELAB_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "PLACELAB_PYTHON=ON but pybind11 was not found (Debian: pybind11-dev python3-dev)")
  endif()
endif()
message(STATUS "placelab: Python module ${PLACELAB_HAVE_PYTHON}")

# MPI (docs/distributed.md): `mpirun placelab sweep|run|calibrate` when found (AUTO) or required
# (ON). Without it the CLI builds and says so when started under mpirun. The C API only: the
# deprecated C++ bindings are skipped.
set(PLACELAB_HAVE_MPI OFF)
if(NOT PLACELAB_MPI STREQUAL "OFF")
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(PLACELAB_HAVE_MPI ON)
    find_program(PLACELAB_MPIEXEC NAMES mpirun mpiexec)
  elseif(PLACELAB_MPI STREQUAL "ON")
    message(FATAL_ERROR "PLACELAB_MPI=ON but MPI was not found (Debian: libopenmpi-dev openmpi-bin)")
  endif()
endif()
message(STATUS "placelab: MPI support ${PLACELAB_HAVE_MPI}")
