console.log("onceflow CLI: under construction");
