// Linked with one floor's whole library and only the floors under it (tests/CMakeLists.txt): that
// the program links at all is the test. Nothing runs.
int main() { return 0; }
