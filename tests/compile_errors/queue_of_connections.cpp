// Must not compile: reading a queue whose values cannot be made before the read completes.
#include <fiber/fiber.hpp>

#include <string>

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  fiber::simple_queue<fiber::connection<std::string>> ends;
  (void)ends.get().get();
}
