# placelab::warnings — the warning set every placelab target compiles with.
add_library(placelab_warnings INTERFACE)
add_library(placelab::warnings ALIAS placelab_warnings)
target_compile_options(placelab_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow -Wconversion -Wno-sign-conversion -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${PLACELAB_WERROR}>>:-Werror>)
