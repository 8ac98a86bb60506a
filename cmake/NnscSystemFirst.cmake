# The system's protobuf, fmt and spdlog headers before LibTorch's.
#
# A LibTorch from a pip wheel (torch/include) carries protobuf and fmt headers of
# other versions than the libraries nnsc links (Debian's or Ubuntu's libprotobuf,
# libfmt): as an -isystem directory it wins over /usr/include, so the generated
# *.pb.h fail to compile and fmt calls link against symbols of the wrong version
# (fmt::v12::vformat). NNSC_SYSTEM_FIRST is a directory of links to the headers of
# the packages found by find_package; every target that sees LibTorch searches it
# first (nnsc_add_library ... TORCH). Against Debian's LibTorch, which vendors
# neither, it changes nothing: the links lead to the same files.
set(NNSC_SYSTEM_FIRST ${CMAKE_BINARY_DIR}/system-first)
file(MAKE_DIRECTORY ${NNSC_SYSTEM_FIRST})

# nnsc_system_first_link(<name> <candidate include dirs...>): links <name> to the
# first candidate holding it.
function(nnsc_system_first_link name)
  foreach(dir ${ARGN})
    if(EXISTS ${dir}/${name})
      if(NOT EXISTS ${NNSC_SYSTEM_FIRST}/${name})
        file(CREATE_LINK ${dir}/${name} ${NNSC_SYSTEM_FIRST}/${name} SYMBOLIC)
      endif()
      return()
    endif()
  endforeach()
  message(WARNING "nnsc: no ${name}/ headers in ${ARGN}; LibTorch's copy may be used")
endfunction()

get_target_property(_fmt_inc fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
if(TARGET spdlog::spdlog)
  get_target_property(_spdlog_inc spdlog::spdlog INTERFACE_INCLUDE_DIRECTORIES)
endif()
foreach(_var _fmt_inc _spdlog_inc)
  if(NOT ${_var})
    set(${_var} /usr/include)
  endif()
endforeach()
nnsc_system_first_link(google ${Protobuf_INCLUDE_DIRS} /usr/include)
nnsc_system_first_link(fmt ${_fmt_inc} /usr/include)
nnsc_system_first_link(spdlog ${_spdlog_inc} /usr/include)
