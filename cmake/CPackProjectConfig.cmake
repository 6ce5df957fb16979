# cmake/CPackProjectConfig.cmake: read by cpack for each package it makes (CPACK_PROJECT_CONFIG_FILE).
# Debian packages install into /usr, and what the build compiled in (libvram_preload.so's directory
# for vram run, the Python package's path to libvram.so, the Slurm plugin's directory) follows the
# prefix it was configured with: a build configured for another prefix is refused, naming the fix.
if(CPACK_GENERATOR STREQUAL "DEB" AND NOT CPACK_VRAM_INSTALL_PREFIX STREQUAL "/usr")
  message(FATAL_ERROR "vram: Debian packages install into /usr, but this build was configured for "
    "${CPACK_VRAM_INSTALL_PREFIX}: configure a build with -DCMAKE_INSTALL_PREFIX=/usr and run cpack there")
endif()
