#pragma once
// The route search of Machine::finalize, apart from its validation: the rule that picks each
// device-to-device route (machine.h, Machine::finalize) and its cost on large machines.

#include "placelab/hwmodels/machine.h"

namespace placelab {

// Every route of a machine whose names, values and links finalize() has already validated.
// Sources are searched on `threads` threads (0: the machine's cores for machines of hundreds of
// devices, else one); the table is the same, bit for bit, whatever the count. Throws MachineError
// for a device no route reaches and for a switch mesh with too many alternative paths.
RouteTable search_routes(const Machine& machine, std::size_t threads = 0);

}  // namespace placelab
