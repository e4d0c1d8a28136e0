# Writes OUT, a C file holding the bytes of IN as `const unsigned char NAME[]`
# (NUL-terminated) and `const unsigned long NAME_len`.
#   cmake -DIN=file -DOUT=file.c -DNAME=sym -P embed.cmake
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "// generated from ${IN} by cmake/embed.cmake\nconst unsigned char ${NAME}[] = {\n${bytes}0x00};\nconst unsigned long ${NAME}_len = ${len};\n")
