// The translation unit that builds the tools' shared precompiled header
// (CLI11 and ToolMain.h; tools/CMakeLists.txt). It defines nothing.
