# placelab::warnings — the warning set every placelab target compiles with.
add_library(placelab_warnings INTERFACE)
add_library(placelab::warnings ALIAS placelab_warnings)
target_compile_options(placelab_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow -Wconversion -Wno-sign-conversion -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${PLACELAB_WERROR}>>:-Werror>)
# gcc's sanitizer instrumentation makes -Wmaybe-uninitialized fire inside Boost.Graph headers
# (false positives the uninstrumented build does not show); keep it off only there.
if(PLACELAB_SANITIZERS AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(placelab_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
endif()
