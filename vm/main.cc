// Placeholder until the runtime lands.
int main() { return 0; }
