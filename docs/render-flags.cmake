# Writes what a program prints with --help-format=FORMAT (markdown, man)
# to OUT, replacing OUT only once the program has printed it whole:
#   cmake -DBIN=path -DFORMAT=markdown -DOUT=page.md -P render-flags.cmake
foreach(v BIN FORMAT OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "render-flags.cmake: -D${v}=... is required")
  endif()
endforeach()
execute_process(COMMAND ${BIN} --help-format=${FORMAT}
                OUTPUT_FILE ${OUT}.tmp RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}.tmp)
  message(FATAL_ERROR "${BIN} --help-format=${FORMAT}: exit ${rc}")
endif()
file(RENAME ${OUT}.tmp ${OUT})
