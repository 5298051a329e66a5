# install_units.cmake - run by `cmake --install` (install(CODE) in
# EmberInstallExtras.cmake): writes the example configurations and the
# systemd units for the prefix being installed to, which `--prefix` may
# change after configuring, so the units name the binaries and files that
# are really there.
#
# In: CMAKE_INSTALL_PREFIX (the install-time prefix), EMBER_SOURCE_DIR,
# EMBER_BINARY_DIR and the GNUInstallDirs values EMBER_SBINDIR,
# EMBER_SYSCONFDIR, EMBER_DOCDIR (relative to the prefix, or absolute).

# GNUInstallDirs' rule: a relative directory hangs under the prefix, except
# that the /usr prefix keeps its configuration in /etc.
function(ember_install_dir out rel)
  if(IS_ABSOLUTE "${rel}")
    set(dir "${rel}")
  elseif(rel STREQUAL "etc" AND CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    set(dir "/etc")
  else()
    set(dir "${CMAKE_INSTALL_PREFIX}/${rel}")
  endif()
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

ember_install_dir(CMAKE_INSTALL_FULL_SBINDIR "${EMBER_SBINDIR}")
ember_install_dir(CMAKE_INSTALL_FULL_DOCDIR "${EMBER_DOCDIR}")
ember_install_dir(sysconfdir "${EMBER_SYSCONFDIR}")
set(EMBER_CONF_DIR "${sysconfdir}/ember")

file(INSTALL "${EMBER_SOURCE_DIR}/deploy/nam.conf.example"
     DESTINATION "${EMBER_CONF_DIR}" RENAME nam.conf)
file(INSTALL "${EMBER_SOURCE_DIR}/deploy/gam.conf.example"
     DESTINATION "${EMBER_CONF_DIR}" RENAME gam.conf)

set(staging "${EMBER_BINARY_DIR}/systemd-install")
foreach(unit ember-nam ember-gam)
  configure_file("${EMBER_SOURCE_DIR}/deploy/systemd/${unit}.service.in"
                 "${staging}/${unit}.service" @ONLY)
  file(INSTALL "${staging}/${unit}.service"
       DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endforeach()
