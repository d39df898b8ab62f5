// fiber/fiber.hpp - everything.
#pragma once
#include "fiber/codec.hpp"
#include "fiber/config.hpp"
#include "fiber/context.hpp"
#include "fiber/error.hpp"
#include "fiber/log.hpp"
#include "fiber/meta.hpp"
#include "fiber/op.hpp"
#include "fiber/pipe.hpp"
#include "fiber/pool.hpp"
#include "fiber/process.hpp"
#include "fiber/registry.hpp"
#include "fiber/simple_queue.hpp"
