# EmberInstallExtras.cmake - what `cmake --install` puts beside the binaries
# and libraries: example configurations, systemd units with the installed
# paths, sysusers.d and tmpfiles.d entries, man pages made by help2man from
# each binary's real --help, bash completion and the docs.
#
# Paths follow GNUInstallDirs. Configurations go to SYSCONFDIR/ember
# (PREFIX/etc/ember, but /etc/ember for prefix /usr, as GNUInstallDirs
# does; debhelper passes /etc); units, sysusers.d and
# tmpfiles.d under PREFIX/lib, where systemd looks for them with prefix /usr.

# Configurations and units are written at install time
# (cmake/install_units.cmake): `cmake --install --prefix P` must get units
# that name P's binaries and configurations, not the configure-time prefix.
install(CODE "
  set(EMBER_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
  set(EMBER_BINARY_DIR \"${PROJECT_BINARY_DIR}\")
  set(EMBER_SBINDIR \"${CMAKE_INSTALL_SBINDIR}\")
  set(EMBER_SYSCONFDIR \"${CMAKE_INSTALL_SYSCONFDIR}\")
  set(EMBER_DOCDIR \"${CMAKE_INSTALL_DOCDIR}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/install_units.cmake\")")

# The same units for this build's prefix, for `systemd-analyze security`.
set(EMBER_CONF_DIR ${CMAKE_INSTALL_FULL_SYSCONFDIR}/ember)
foreach(unit ember-nam ember-gam)
  configure_file(${PROJECT_SOURCE_DIR}/deploy/systemd/${unit}.service.in
                 ${PROJECT_BINARY_DIR}/systemd/${unit}.service @ONLY)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/deploy/sysusers/ember.conf
        DESTINATION lib/sysusers.d)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/tmpfiles/ember.conf
        DESTINATION lib/tmpfiles.d)

install(FILES ${PROJECT_SOURCE_DIR}/completion/ember.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME ember)
install(FILES ${PROJECT_SOURCE_DIR}/completion/emberctl.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME emberctl)

# the networks `ember train` ships with: LeNet-like, and darknet's small
# classifier pattern
install(FILES ${PROJECT_SOURCE_DIR}/accelerators/cnn/nets/lenet.cfg
              ${PROJECT_SOURCE_DIR}/accelerators/cnn/nets/darknet_small.cfg
        DESTINATION ${CMAKE_INSTALL_DATADIR}/ember/nets)

install(FILES ${PROJECT_SOURCE_DIR}/README.md
              ${PROJECT_SOURCE_DIR}/deploy/nam.conf.example
              ${PROJECT_SOURCE_DIR}/deploy/gam.conf.example
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Man pages from the binaries' own --help and --version, so they cannot
# drift from them.
find_program(EMBER_HELP2MAN help2man)
if(EMBER_HELP2MAN)
  set(man_pages)
  foreach(spec "ember_cli;ember;1;run accelerators on files through ember"
               "emberctl;emberctl;1;administer an ember cluster"
               "ember_gam_sim;ember-gam-sim;1;simulate ember-gam's scheduling policies"
               "ember-nam;ember-nam;8;ember node accelerator manager"
               "ember-gam;ember-gam;8;ember global accelerator manager")
    list(GET spec 0 target)
    list(GET spec 1 name)
    list(GET spec 2 section)
    list(GET spec 3 what)
    set(page ${PROJECT_BINARY_DIR}/man/${name}.${section})
    # cmake/man/NAME.h2m: sections --help does not give (SEE ALSO)
    set(include)
    set(include_file ${PROJECT_SOURCE_DIR}/cmake/man/${name}.h2m)
    if(EXISTS ${include_file})
      set(include --include=${include_file})
    endif()
    add_custom_command(OUTPUT ${page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
      COMMAND ${EMBER_HELP2MAN} --no-info --section=${section}
              --name=${what} ${include} --output=${page}
              $<TARGET_FILE:${target}>
      DEPENDS ${target} $<$<BOOL:${include}>:${include_file}>
      COMMENT "Man page ${name}(${section})" VERBATIM)
    list(APPEND man_pages ${page})
    install(FILES ${page}
            DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
  endforeach()
  # One page per `ember` command (ember-lnl(1) and so on, as git does),
  # from `ember help COMMAND` through a wrapper that help2man can run.
  foreach(spec "align;align query i with reference i (Smith-Waterman)"
               "lnl;log-likelihoods of fixed trees for an alignment (plf)"
               "train;train a CNN on MNIST-style images (cnn)"
               "accelerators;list the accelerators and platforms a NAM offers"
               "beagle;run a BEAGLE program (MrBayes) on ember's plf accelerator")
    list(GET spec 0 CMD)
    list(GET spec 1 what)
    set(wrapper_in ${PROJECT_BINARY_DIR}/man/wrappers/ember-${CMD}.in)
    set(wrapper ${PROJECT_BINARY_DIR}/man/wrappers/$<CONFIG>/ember-${CMD})
    set(EMBER "$<TARGET_FILE:ember_cli>")
    configure_file(${PROJECT_SOURCE_DIR}/cmake/man/ember-command.sh.in
                   ${wrapper_in} @ONLY)
    file(GENERATE OUTPUT ${wrapper} INPUT ${wrapper_in}
         FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                          GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
    set(page ${PROJECT_BINARY_DIR}/man/ember-${CMD}.1)
    add_custom_command(OUTPUT ${page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
      COMMAND ${EMBER_HELP2MAN} --no-info --section=1 --name=${what}
              --output=${page} ${wrapper}
      DEPENDS ember_cli ${PROJECT_SOURCE_DIR}/cmake/man/ember-command.sh.in
      COMMENT "Man page ember-${CMD}(1)" VERBATIM)
    list(APPEND man_pages ${page})
    install(FILES ${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  endforeach()
  add_custom_target(ember_man_pages ALL DEPENDS ${man_pages})
else()
  message(STATUS "help2man not found: no man pages")
endif()
