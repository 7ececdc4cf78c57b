# PLACELAB_SANITIZERS="address;undefined" builds everything with those sanitizers.
if(PLACELAB_SANITIZERS)
  string(REPLACE ";" "," _placelab_san "${PLACELAB_SANITIZERS}")
  add_compile_options(-fsanitize=${_placelab_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_placelab_san})
endif()
